// Test evaluation page: a chosen file is shown in its text area (the file itself is sent too).
"use strict";
(function () {
  for (const [inputId, areaId] of [["ground-truth-file", "ground-truth"], ["output-file", "output"]]) {
    const input = document.getElementById(inputId);
    const area = document.getElementById(areaId);
    input.addEventListener("change", function () {
      const file = input.files[0];
      if (file) {
        file.text().then(function (text) { area.value = text; });
      }
    });
  }
})();
