// The Runs page (/runs): the runs ticked become /compare?runs=A,B[,C] (ids in the order
// ticked); the button stays off until two are ticked. No data goes through innerHTML.
(() => {
  const form = document.getElementById("compare-form");
  if (!form) return;
  const button = document.getElementById("compare-selected");
  const said = document.getElementById("compare-count");
  const picked = [];
  function update() {
    button.disabled = picked.length < 2;
    said.textContent = picked.length
      ? `${picked.length} run${picked.length === 1 ? "" : "s"} ticked`
      : "tick two or more runs";
  }
  form.addEventListener("change", (event) => {
    const box = event.target;
    if (!box.matches("input[data-compare]")) return;
    const at = picked.indexOf(box.value);
    if (box.checked && at < 0) picked.push(box.value);
    if (!box.checked && at >= 0) picked.splice(at, 1);
    update();
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (picked.length < 2) return;
    window.location.assign("/compare?runs=" + picked.map(encodeURIComponent).join(","));
  });
  for (const box of form.querySelectorAll("input[data-compare]:checked")) picked.push(box.value);
  update();
})();
