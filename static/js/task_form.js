/* The task form: "+ New task" on the board (and its key, n), its errors, and the card panel's edit part.
 *
 * The form posts with htmx; a refused one answers 400 (403, 409) with the form again, its errors by
 * their fields, which htmx would not swap in by default. The description's preview is rendered by the
 * server (hx-post on the textarea), with the same markdown filter as the panel.
 */
(function () {
  "use strict";

  const dialog = document.getElementById("new-task");
  const opener = document.getElementById("new-task-open");
  const announcer = document.getElementById("board-announce");
  const FORM_TARGETS = "#new-task-body, .task-detail";

  function announce(text) {
    if (!announcer) return;
    announcer.textContent = "";
    window.setTimeout(() => { announcer.textContent = text; }, 30);
  }

  function typingIn(element) {
    if (!element || !element.closest) return false;
    return element.isContentEditable || Boolean(element.closest("input, textarea, select, [contenteditable]"));
  }

  let returnFocus = null;
  function showForm() {
    if (!dialog.open) dialog.showModal();
    const title = dialog.querySelector("input[name=title]");
    if (title) title.focus();
  }
  // Fetched on first opening; kept afterwards, so what was typed before closing it is still there.
  function openForm() {
    if (!dialog) return;
    returnFocus = document.activeElement;
    if (dialog.querySelector("form.task-form")) { showForm(); return; }
    htmx.ajax("GET", dialog.dataset.formUrl, { target: "#new-task-body", swap: "outerHTML" }).then(showForm);
  }

  if (dialog) {
    opener.addEventListener("click", (event) => { event.preventDefault(); openForm(); });
    dialog.addEventListener("close", () => {
      if (returnFocus && document.contains(returnFocus)) returnFocus.focus();
      returnFocus = null;
    });
    dialog.addEventListener("click", (event) => { if (event.target === dialog) dialog.close(); });
    document.addEventListener("keydown", (event) => {
      if (event.key !== "n" || event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
      if (typingIn(event.target) || document.querySelector("dialog[open]")) return;
      event.preventDefault();
      openForm();
    });
  }

  // A refused form comes back with its errors: swap it in, and put the focus on the first field in error.
  document.body.addEventListener("htmx:beforeSwap", (event) => {
    const status = event.detail.xhr.status;
    if (status >= 400 && status < 500 && event.detail.target.matches(FORM_TARGETS)) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
  document.body.addEventListener("htmx:afterSettle", (event) => {
    const invalid = event.detail.elt && event.detail.elt.querySelector
      ? event.detail.elt.querySelector("[aria-invalid=true]") : null;
    if (invalid && event.detail.xhr && event.detail.xhr.status >= 400) invalid.focus();
  });

  // Created: close the form; the card arrives with the board's push (on this board and every other).
  document.body.addEventListener("taskCreated", (event) => {
    const detail = event.detail || {};
    announce(detail.message || "Task created.");
    if (!dialog || !dialog.open) return;
    returnFocus = null;
    dialog.close();
    const focusCard = () => {
      const card = document.getElementById("task-" + detail.id);
      if (card) card.focus();
      return Boolean(card);
    };
    if (focusCard()) return;
    const columns = document.getElementById("board-columns");
    if (!columns) return;
    const watch = new MutationObserver(() => { if (focusCard()) watch.disconnect(); });
    watch.observe(columns.parentElement, { childList: true, subtree: true });
    window.setTimeout(() => watch.disconnect(), 10000);
  });
})();
