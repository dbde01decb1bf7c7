// The change page: a click on a line number opens a comment form under that line. The form is the
// page's <template>, posted by htmx; the path and line are set as values (never as HTML).
(function () {
  "use strict";
  const template = document.getElementById("comment-form-template");

  document.addEventListener("click", function (event) {
    const cancel = event.target.closest("button.cancel-comment");
    if (cancel) {
      cancel.closest("tr").remove();
      return;
    }
    const number = event.target.closest("button.ln");
    if (!number || !template) return;
    const file = number.closest("section.file");
    const row = number.closest("tr");
    const form = template.content.firstElementChild.cloneNode(true);
    form.querySelector("td").colSpan = row.closest("table").classList.contains("split") ? 4 : 3;
    form.querySelector("[name=path]").value = file.dataset.path;
    form.querySelector("[name=line]").value = number.textContent;
    form.querySelector(".where").textContent = file.dataset.path + ":" + number.textContent;
    row.after(form);
    window.htmx.process(form);
    form.querySelector("textarea").focus();
  });
})();
