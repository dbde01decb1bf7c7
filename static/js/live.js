/* Live pages pushed through htmx's ws extension (the session page): the client half of the
 * numbering in config/live.py.
 *
 * Every frame starts with <!--live:N-->. The page was rendered at data-live-seq; a frame whose
 * number is not the last one + 1 (one missed, a restarted Redis counting again) is not applied:
 * the page refetches the parts named in data-live-parts instead, and takes the number the fresh
 * page was rendered at. So does a reconnect, when anything may have happened.
 */
(function () {
  "use strict";

  function follow(root) {
    const parts = (root.dataset.liveParts || "").split(/\s+/).filter(Boolean);
    let lastSeq = Number(root.dataset.liveSeq || 0);
    let opened = false;
    let fetching = false;
    let seenWhileFetching = 0;

    async function refetch() {
      if (fetching) return;
      fetching = true;
      seenWhileFetching = 0;
      try {
        const response = await fetch(window.location.href, {
          credentials: "same-origin", headers: { "X-Requested-With": "XMLHttpRequest" },
        });
        if (!response.ok) return;  // the next frame is a gap again, and retries
        const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
        const freshRoot = fresh.querySelector("[data-live-seq]");
        if (!freshRoot) return;
        for (const id of parts) {
          const old = document.getElementById(id);
          const part = fresh.getElementById(id);
          // A reply being typed is left alone; the status push redraws the box when it matters.
          if (!old || !part || old.contains(document.activeElement)) continue;
          old.replaceWith(part);
          htmx.process(part);
        }
        lastSeq = Number(freshRoot.dataset.liveSeq || 0);
      } catch (e) {
        return;
      } finally {
        fetching = false;
      }
      // A frame dropped meanwhile that the fresh page does not hold yet.
      if (seenWhileFetching > lastSeq) refetch();
    }

    root.addEventListener("htmx:wsBeforeMessage", (event) => {
      const match = /^<!--live:(\d+)-->/.exec(event.detail.message);
      if (!match) return;
      const seq = Number(match[1]);
      if (fetching) {
        seenWhileFetching = Math.max(seenWhileFetching, seq);
        event.preventDefault();
        return;
      }
      const inOrder = seq === lastSeq + 1;
      lastSeq = seq;
      if (!inOrder) {
        event.preventDefault();
        refetch();
      }
    });
    root.addEventListener("htmx:wsOpen", () => {
      if (opened) refetch();
      opened = true;
    });
  }

  document.querySelectorAll("[ws-connect][data-live-seq]").forEach(follow);
})();
