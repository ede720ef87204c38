// The server's API, from the browser: JSON routes, SSE streams, and the bearer token.
//
// Errors are `{error: {code, message}}`; they become `ApiError`s with the server's message.
// A 401 asks the person for the token once (through the prompt the page installs), keeps it
// in localStorage and retries.

const TOKEN_KEY = "kestrel.studio.token";

/** An error answer of the API. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let askForToken = async () => null;

/** Installs the function that asks the person for a token (resolves to it, or null). */
export function onTokenNeeded(ask) {
  askForToken = ask;
}

/** The stored token, if any. */
export function token() {
  try {
    return localStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return "";
  }
}

/** Stores (or, with an empty value, forgets) the token. */
export function setToken(value) {
  try {
    if (value) localStorage.setItem(TOKEN_KEY, value);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    // Private mode without storage: the token lasts for this page only.
  }
}

function headers(json) {
  const h = {};
  if (json) h["content-type"] = "application/json";
  const t = token();
  if (t) h.authorization = `Bearer ${t}`;
  return h;
}

async function errorOf(response) {
  let code = "http_error";
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    }
  } catch {
    // Not JSON: keep the status line.
  }
  return new ApiError(response.status, code, message);
}

/** The prompt in progress: requests refused at the same time share one. */
let asking = null;

/** Asks for a token once for all the requests refused at the same time. */
function tokenFor(reason) {
  if (!asking) {
    asking = Promise.resolve(askForToken(reason)).finally(() => {
      asking = null;
    });
  }
  return asking;
}

/** Fetches `path`, asking for a token on 401 (once) and retrying. */
async function send(path, options, retried = false) {
  const sent = token();
  const response = await fetch(path, {
    ...options,
    headers: headers(options.body !== undefined),
  });
  if (response.status === 401 && !retried) {
    // Another request may have been given a token meanwhile.
    if (token() && token() !== sent) return send(path, options, true);
    const given = await tokenFor((await errorOf(response.clone())).message);
    if (given) {
      setToken(given);
      return send(path, options, true);
    }
  }
  if (!response.ok) throw await errorOf(response);
  return response;
}

/** A JSON route: `api("/api/agents")`, `api(path, {method: "POST", body})`. */
export async function api(path, { method = "GET", body, signal } = {}) {
  const response = await send(path, {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  if (response.status === 204) return null;
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

/** A query string from an object, leaving out empty values. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}

/**
 * An SSE route: POSTs `body` and calls `onEvent` with each `data:` event (parsed JSON) until
 * `data: [DONE]` or the end of the body. Comments (`: heartbeat`) are skipped. `onOpen` runs
 * once the server has answered (a failure in it ends the stream with its error).
 */
export async function stream(path, body, onEvent, { signal, onOpen } = {}) {
  const response = await send(path, {
    method: "POST",
    body: JSON.stringify(body),
    signal,
  });
  const reader = response.body.getReader();
  if (onOpen) {
    // The server has taken the request (a thread subscription exists by now).
    try {
      await onOpen();
    } catch (error) {
      reader.cancel().catch(() => {});
      throw error;
    }
  }
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = frameEnd(buffer)) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^(\r?\n){1,2}/, "");
      const data = frame
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""))
        .join("\n");
      if (!data) continue;
      if (data === "[DONE]") return;
      let event;
      try {
        event = JSON.parse(data);
      } catch {
        continue;
      }
      onEvent(event);
    }
  }
}

/** Where the first complete SSE frame of `buffer` ends (before its blank line), or -1. */
function frameEnd(buffer) {
  const lf = buffer.indexOf("\n\n");
  const crlf = buffer.indexOf("\r\n\r\n");
  if (lf < 0) return crlf;
  if (crlf < 0) return lf;
  return Math.min(lf, crlf);
}

/**
 * A workflow stream (Mastra's format, not SSE): POSTs `body` and calls `onEvent` with each
 * record (JSON followed by the record separator U+001E) until the body ends. `onOpen` runs
 * once the server has taken the request (a refusal throws its `ApiError` before).
 */
export async function records(path, body, onEvent, { signal, onOpen } = {}) {
  const response = await send(path, {
    method: "POST",
    body: JSON.stringify(body),
    signal,
  });
  if (onOpen) onOpen();
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const flush = (final) => {
    let end;
    while ((end = buffer.indexOf("\u001e")) >= 0) {
      const record = buffer.slice(0, end);
      buffer = buffer.slice(end + 1);
      emit(record);
    }
    if (final && buffer.trim()) emit(buffer);
  };
  const emit = (record) => {
    if (!record.trim()) return;
    try {
      onEvent(JSON.parse(record));
    } catch {
      // A record that is not JSON: skipped, as the Mastra client would fail on it.
    }
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    flush(false);
  }
  buffer += decoder.decode();
  flush(true);
}
