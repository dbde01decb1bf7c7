/* Switchyard board: live updates, drag and drop, keyboard moves, the task panel.
 *
 * Live updates use a small websocket client of our own (not htmx's ws extension) because every
 * frame carries a sequence number that must be checked before its HTML is applied: on a gap, a
 * number that goes back (Redis restarted) or a reconnect, the client refetches the columns with
 * htmx instead. Pushed cards are placed by rank, so two people moving at once see one order.
 */
(function () {
  "use strict";

  const board = () => document.getElementById("board-columns");
  const announcer = document.getElementById("board-announce");
  const errorBox = document.getElementById("board-error");
  const live = document.getElementById("board-live");
  const panel = document.getElementById("task-panel");
  const panelBody = document.getElementById("task-panel-body");
  const headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");

  let lastSeq = Number(board().dataset.seq || 0);

  function announce(text) {
    announcer.textContent = "";
    window.setTimeout(() => { announcer.textContent = text; }, 30);
  }

  function showError(text) {
    errorBox.textContent = text;
    errorBox.hidden = false;
    announce(text);
  }

  function clearError() {
    errorBox.hidden = true;
    errorBox.textContent = "";
  }

  function isFiltered() {
    return board().dataset.filtered === "1";
  }

  // --- Refetch: the whole set of columns, with the filters in the URL ----------------------
  let refetchTimer = null;
  function refetch() {
    window.clearTimeout(refetchTimer);
    refetchTimer = window.setTimeout(() => {
      const focusedId = document.activeElement && document.activeElement.dataset
        ? document.activeElement.dataset.id : null;
      htmx.ajax("GET", window.location.pathname + window.location.search, {
        target: "#board-columns", swap: "outerHTML",
      }).then(() => {
        if (focusedId) {
          const card = document.getElementById("task-" + focusedId);
          if (card) card.focus({ preventScroll: true });
        }
      });
    }, 150);
  }

  // --- Applying cards (pushes and move answers) ------------------------------------------------
  function cardKey(el) {
    return [Number(el.dataset.rank), Number(el.dataset.id)];
  }

  function placeCard(card) {
    const list = document.getElementById("cards-" + card.dataset.status);
    if (!list) return;
    const [rank, id] = cardKey(card);
    let before = null;
    for (const other of list.children) {
      if (other === card) continue;
      const [r, i] = cardKey(other);
      if (r > rank || (r === rank && i > id)) { before = other; break; }
    }
    if (card.parentElement !== list || card.nextElementSibling !== before) list.insertBefore(card, before);
  }

  function applyCards(payload) {
    const template = document.createElement("template");
    template.innerHTML = payload.html || "";
    const focused = document.activeElement;
    for (const el of Array.from(template.content.children)) {
      el.removeAttribute("hx-swap-oob");
      const old = document.getElementById(el.id);
      if (el.classList.contains("task-card")) {
        if (pending.has(el.dataset.id)) continue;  // its own move's answer will place it
        const hadFocus = old && (old === focused || old.contains(focused));
        if (old) old.remove();
        placeCard(el);
        htmx.process(el);
        if (hadFocus) el.focus({ preventScroll: true });
        refreshPanelFor(el);
      } else if (old) {
        old.replaceWith(el);
      }
    }
    for (const id of payload.removed || []) {
      const gone = document.getElementById("task-" + id);
      if (gone) gone.remove();
    }
  }

  // --- The websocket ------------------------------------------------------------------------------
  let socket = null;
  let retryMs = 1000;
  let connectedOnce = false;

  function setLive(state, text) {
    live.dataset.state = state;
    live.querySelector(".live-text").textContent = text;
  }

  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + window.location.host + "/ws/board/");
    socket.addEventListener("open", () => { retryMs = 1000; setLive("live", "Live"); });
    socket.addEventListener("message", (event) => {
      let message;
      try { message = JSON.parse(event.data); } catch (e) { return; }
      if (message.type === "hello") {
        // On a reconnect anything may have happened; on the first connect, whatever
        // committed between rendering the page and opening the socket.
        if (connectedOnce || message.seq !== lastSeq) refetch();
        connectedOnce = true;
        lastSeq = message.seq;
      } else if (message.type === "tasks") {
        const inOrder = message.seq === lastSeq + 1;
        lastSeq = message.seq;
        if (!inOrder || isFiltered()) refetch();  // a filtered board can't tell if a card now matches
        else applyCards(message);
        document.body.dispatchEvent(new CustomEvent("switchyard:live"));  // the top bar's "Needs you" count
      }
    });
    socket.addEventListener("close", () => {
      setLive("offline", "Reconnecting…");
      window.setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, 15000);
    });
  }

  // --- Moves --------------------------------------------------------------------------------------
  const columnOrder = () => Array.from(document.querySelectorAll("#board-columns .column")).map((c) => c.dataset.status);
  const columnLabel = (status) => {
    const el = document.querySelector("#column-" + status + " .column-name");
    return el ? el.textContent : status;
  };
  const cardTitle = (card) => card.querySelector(".card-title").textContent.trim();

  // Moves still waiting for their answer, per card id: pushes and answers leave those cards
  // where the person put them until the last of their moves is answered.
  const pending = new Map();

  async function postMove(id, target) {
    const body = new URLSearchParams({ status: target.status });
    if (target.after) body.set("after_id", target.after);
    if (target.before) body.set("before_id", target.before);
    clearError();
    let answer = null;
    let failed = null;
    try {
      const response = await fetch(board().dataset.taskUrl + id + "/move/", {
        method: "POST", body: body, credentials: "same-origin",
        headers: Object.assign({ "X-Requested-With": "XMLHttpRequest" }, headers),
      });
      answer = await response.json().catch(() => null);
      if (!response.ok || !answer) failed = (answer && answer.message) || "The move failed (" + response.status + "); reload the page.";
    } catch (e) {
      failed = "The move could not be sent: you seem to be offline.";
    }
    const left = pending.get(id) - 1;
    if (left > 0) pending.set(id, left); else pending.delete(id);
    if (failed) {
      showError(failed);
      refetch();  // puts every card back where the server has it
      return;
    }
    applyCards(answer);
    const moved = document.getElementById("task-" + id);
    if (moved && !pending.has(id)) {
      const list = moved.parentElement;
      const position = Array.prototype.indexOf.call(list.children, moved) + 1;
      announce(`Moved “${cardTitle(moved)}” to ${columnLabel(target.status)}, position ${position} of ${list.children.length}.`);
    }
  }

  // One move in flight at a time, sent in the order made; each carries the neighbours the card
  // had on screen when it was made, so quick key presses can't race each other.
  let moveChain = Promise.resolve();
  function queueMove(card) {
    const id = card.dataset.id;
    const prev = card.previousElementSibling;
    const next = card.nextElementSibling;
    const target = {
      status: card.parentElement.dataset.status,
      after: prev ? prev.dataset.id : null,
      before: next ? next.dataset.id : null,
    };
    card.dataset.status = target.status;
    pending.set(id, (pending.get(id) || 0) + 1);
    moveChain = moveChain.then(() => postMove(id, target)).catch(() => {});
  }

  function moveBy(card, direction) {
    const list = card.parentElement;
    let status = list.dataset.status;
    if (direction === "up" || direction === "down") {
      const sibling = direction === "up" ? card.previousElementSibling : card.nextElementSibling;
      if (!sibling) { announce(direction === "up" ? "Already at the top." : "Already at the bottom."); return; }
      list.insertBefore(card, direction === "up" ? sibling : sibling.nextElementSibling);
    } else {
      const order = columnOrder();
      const index = order.indexOf(status) + (direction === "left" ? -1 : 1);
      if (index < 0 || index >= order.length) { announce("No column further " + direction + "."); return; }
      status = order[index];
      const target = document.getElementById("cards-" + status);
      target.insertBefore(card, target.firstElementChild);  // to the top, where it is seen
    }
    card.focus({ preventScroll: false });
    queueMove(card);
  }

  // --- Keyboard -------------------------------------------------------------------------------------
  const ARROWS = { ArrowUp: "up", ArrowDown: "down", ArrowLeft: "left", ArrowRight: "right" };

  function focusNeighbour(card, direction) {
    let target = null;
    if (direction === "up") target = card.previousElementSibling;
    else if (direction === "down") target = card.nextElementSibling;
    else {
      const order = columnOrder();
      const index = Array.prototype.indexOf.call(card.parentElement.children, card);
      let i = order.indexOf(card.parentElement.dataset.status);
      const step = direction === "left" ? -1 : 1;
      for (i += step; i >= 0 && i < order.length && !target; i += step) {
        const cards = document.getElementById("cards-" + order[i]).children;
        if (cards.length) target = cards[Math.min(index, cards.length - 1)];
      }
    }
    if (target) target.focus();
  }

  document.addEventListener("keydown", (event) => {
    const card = event.target.closest && event.target.closest(".task-card");
    if (!card || event.target !== card) return;
    const direction = ARROWS[event.key];
    if (direction && event.altKey) { event.preventDefault(); moveBy(card, direction); return; }
    if (direction && !event.ctrlKey && !event.metaKey) { event.preventDefault(); focusNeighbour(card, direction); return; }
    if (event.key === "Enter" || event.key === " ") { event.preventDefault(); openPanel(card); }
  });

  // --- Buttons and the panel -----------------------------------------------------------------------
  let panelOpener = null;
  function openPanel(card) {
    panelOpener = card;
    const link = card.querySelector(".card-title");
    htmx.ajax("GET", link.getAttribute("href"), { target: "#task-panel-body", swap: "innerHTML" }).then(() => {
      if (!panel.open) panel.showModal();
      const heading = document.getElementById("task-panel-title");
      if (heading) { heading.tabIndex = -1; heading.focus(); }
    });
  }
  // The open panel follows its card: when a push puts the card in another column (a run took it or
  // ended, someone else moved it) or someone edited the task (data-edited, its updated time), the
  // panel is fetched again, unless the person is writing in it.
  function refreshPanelFor(card) {
    const detail = panelBody.querySelector(".task-detail");
    if (!panel.open || !detail || detail.dataset.id !== card.dataset.id) return;
    if (detail.dataset.status === card.dataset.status) {
      // Not moved: fetched again only for an edit made elsewhere. A save from this panel answers
      // with the task's new stamp (data-edited, taken over below), and its push may come first.
      if (detail.dataset.edited === card.dataset.edited || panelSaves.size) return;
    }
    const active = document.activeElement;
    const focusInside = panelBody.contains(active);
    if (focusInside && active.matches("input, textarea, select")) return;
    if (Array.from(panelBody.querySelectorAll(".task-edit input[type=text]")).some(typedIn)) return;
    if (Array.from(panelBody.querySelectorAll("textarea")).some(typedIn)) return;
    const link = card.querySelector(".card-title");
    htmx.ajax("GET", link.getAttribute("href"), { target: "#task-panel-body", swap: "innerHTML" }).then(() => {
      const heading = document.getElementById("task-panel-title");
      if (focusInside && heading) { heading.tabIndex = -1; heading.focus(); }
    });
  }
  // Saves made from the panel and not answered yet (their requests), and the stamp their answers carry.
  const panelSaves = new Set();
  document.body.addEventListener("htmx:beforeRequest", (event) => {
    const verb = event.detail.requestConfig && event.detail.requestConfig.verb;
    if (verb && verb !== "get" && panelBody.contains(event.detail.elt)) panelSaves.add(event.detail.xhr);
  });
  document.body.addEventListener("htmx:afterRequest", (event) => { panelSaves.delete(event.detail.xhr); });
  // Taken over as the answer is swapped in: htmx swaps, then ends the request (afterRequest above),
  // then settles 20 ms later. Taken at the settle, a push landing in those 20 ms found no save in
  // flight and an old stamp, and fetched the panel again over what the person did next.
  document.body.addEventListener("htmx:afterSwap", (event) => {
    const detail = panelBody.querySelector(".task-detail");
    const part = event.target;  // the swapped-in part (an outerHTML swap fires this on the new element)
    if (!detail || !part || !panelBody.contains(part)) return;
    const stamped = part.matches("[data-edited]") ? part : part.querySelector("[data-edited]");
    if (stamped && stamped !== detail) detail.dataset.edited = stamped.dataset.edited;
  });
  // Has the person written something the panel would lose? The edit part's fields start filled
  // (the task's own values), so there it is a change from what was shown.
  function typedIn(field) {
    return field.closest(".task-edit") ? field.value !== field.defaultValue : Boolean(field.value);
  }
  // The panel fetched again replaces what it showed. A poll of the old content still on its way (the run
  // watch's, every 2 s) would answer into a part no longer on the page, and htmx would take the parts
  // kept across redraws (hx-preserve: the raw log, unfolded tool calls) off the page with it: the old
  // content's polls are called off first. Saves (their POSTs) are left to answer.
  function abortPanelPolls() {
    panelBody.querySelectorAll("[hx-get], [data-hx-get]").forEach((elt) => htmx.trigger(elt, "htmx:abort"));
  }
  document.body.addEventListener("htmx:beforeSwap", (event) => {
    if (event.detail.target === panelBody) abortPanelPolls();
  });
  panel.addEventListener("close", () => {
    abortPanelPolls();
    panelBody.innerHTML = "";
    const card = panelOpener && document.getElementById(panelOpener.id);
    if (card) card.focus();
  });
  panel.addEventListener("click", (event) => { if (event.target === panel) panel.close(); });

  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-move]");
    const card = event.target.closest(".task-card");
    if (!card) return;
    if (button) { event.preventDefault(); moveBy(card, button.dataset.move); return; }
    if (event.button === 0 && !event.metaKey && !event.ctrlKey && !event.shiftKey) {
      event.preventDefault();
      openPanel(card);
    }
  });

  // --- Drag and drop (native HTML5) ----------------------------------------------------------------
  let dragged = null;
  let dragOrigin = null;
  let dropped = false;

  document.addEventListener("dragstart", (event) => {
    const card = event.target.closest && event.target.closest(".task-card");
    if (!card) return;
    dragged = card;
    dropped = false;
    dragOrigin = { list: card.parentElement, next: card.nextElementSibling };
    event.dataTransfer.effectAllowed = "move";
    event.dataTransfer.setData("text/plain", card.dataset.id);
    window.requestAnimationFrame(() => card.classList.add("dragging"));
  });

  function cardBelow(list, y) {
    for (const other of list.children) {
      if (other === dragged) continue;
      const box = other.getBoundingClientRect();
      if (y < box.top + box.height / 2) return other;
    }
    return null;
  }

  document.addEventListener("dragover", (event) => {
    if (!dragged) return;
    const column = event.target.closest && event.target.closest(".column");
    if (!column) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "move";
    const list = column.querySelector(".cards");
    const below = cardBelow(list, event.clientY);
    if (dragged.parentElement !== list || dragged.nextElementSibling !== below) list.insertBefore(dragged, below);
    document.querySelectorAll(".column.drop-target").forEach((c) => { if (c !== column) c.classList.remove("drop-target"); });
    column.classList.add("drop-target");
  });

  document.addEventListener("drop", (event) => {
    if (!dragged) return;
    event.preventDefault();
    dropped = true;
    const card = dragged;
    const moved = card.parentElement !== dragOrigin.list || card.nextElementSibling !== dragOrigin.next;
    if (moved) queueMove(card);
  });

  document.addEventListener("dragend", () => {
    if (!dragged) return;
    dragged.classList.remove("dragging");
    document.querySelectorAll(".column.drop-target").forEach((c) => c.classList.remove("drop-target"));
    if (!dropped) dragOrigin.list.insertBefore(dragged, dragOrigin.next);  // cancelled: put it back
    dragged = null;
  });

  // --- A new day (UTC) -----------------------------------------------------------------------------
  // Day budgets count per UTC day: the banner of yesterday's exceeded day budget goes at midnight,
  // when nothing changes and so nothing is pushed. The board refetches its columns then (5 s after,
  // so the server's day has turned too).
  function refetchAtMidnight() {
    const now = new Date();
    const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1, 0, 0, 5);
    window.setTimeout(() => { refetch(); refetchAtMidnight(); }, next - now.getTime());
  }

  connect();
  refetchAtMidnight();
})();
