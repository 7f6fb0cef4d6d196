// The run page's item table: a filter's choice applies at once (the Apply button stays for
// the search box and for pages without JavaScript).
document.querySelectorAll("#items-filter select").forEach((select) => {
  select.addEventListener("change", () => select.form.requestSubmit());
});
