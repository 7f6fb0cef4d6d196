// Configuration page: add and remove rows of the field strategy table (saved by the form).
"use strict";
(function () {
  const body = document.querySelector("#strategy-table tbody");
  const template = document.getElementById("strategy-row");
  document.getElementById("add-row").addEventListener("click", function () {
    const row = template.content.firstElementChild.cloneNode(true);
    body.appendChild(row);
    row.querySelector("input[name=field]").focus();
  });
  body.addEventListener("click", function (event) {
    const button = event.target.closest(".remove-row");
    if (button) {
      button.closest("tr").remove();
    }
  });
})();
