// Queued messages: while a run is active the composer's Queue button holds a message for the
// thread's next run (`queue-message`). The queue shows above the composer, each message with a
// Cancel button, and is read back until it is empty and the thread idle; then the thread's
// history, with the queued messages and their answers, is loaded again.

import { api } from "./api.js";
import { h } from "./render.js";

const POLL_MS = 500;

export class QueuePanel {
  /** `el`: where the queue is drawn; `onDrained()`: called once the queue has run. */
  constructor(el, { onDrained }) {
    this.el = el;
    this.onDrained = onDrained;
    this.thread = null;
    this.messages = [];
    this.timer = null;
  }

  /** Follows the queue of this thread (or none). */
  follow(agentId, resourceId, threadId) {
    const key = threadId ? { agentId, resourceId, threadId } : null;
    const same = this.thread && key && this.thread.agentId === agentId && this.thread.resourceId === resourceId && this.thread.threadId === threadId;
    if (same) return;
    this.thread = key;
    this.messages = [];
    clearTimeout(this.timer);
    this.draw();
    if (key) this.refresh();
  }

  path(suffix) {
    return `/api/agents/${encodeURIComponent(this.thread.agentId)}${suffix}`;
  }

  body() {
    return { resourceId: this.thread.resourceId, threadId: this.thread.threadId };
  }

  /** Queues `text` on the followed thread. */
  async queue(text) {
    if (!this.thread) return;
    await api(this.path("/queue-message"), { method: "POST", body: { message: text, ...this.body() } });
    await this.refresh();
  }

  async cancel(id) {
    await api(this.path("/threads/queue/cancel"), { method: "POST", body: { ...this.body(), ids: [id] } });
    await this.refresh();
  }

  /** Reads the queue; polls while it holds messages or a run it waits for is active. */
  async refresh() {
    clearTimeout(this.timer);
    const thread = this.thread;
    if (!thread) return;
    // Answers may come back out of order: only the newest read is drawn.
    const read = (this.reads = (this.reads || 0) + 1);
    let answer;
    try {
      answer = await api(this.path("/threads/queue"), { method: "POST", body: this.body() });
    } catch {
      // Read again a little later: the queue is still there.
      if (read === this.reads) this.timer = setTimeout(() => this.refresh(), POLL_MS * 2);
      return;
    }
    if (thread !== this.thread || read !== this.reads) return;
    const had = this.messages.length > 0 || this.waiting;
    this.messages = (answer && answer.messages) || [];
    this.waiting = this.messages.length > 0 || (had && answer && answer.activeRunId);
    this.draw();
    if (this.waiting) this.timer = setTimeout(() => this.refresh(), POLL_MS);
    else if (had) this.onDrained();
  }

  draw() {
    this.el.hidden = this.messages.length === 0;
    this.el.replaceChildren(
      ...this.messages.map((m, i) =>
        h(
          "div",
          { class: "queued-message", "data-testid": "queued-message", "data-id": m.id },
          h("span", { class: "chip" }, i === 0 ? "next" : `queued ${i + 1}`),
          " ",
          h("span", { class: "queued-text" }, m.text),
          " ",
          h("button", { type: "button", class: "small ghost", "data-testid": "queued-cancel", onclick: () => this.cancel(m.id) }, "Cancel"),
        ),
      ),
    );
  }
}
