// Every call the console makes to the registry. Reads go to the console's
// JSON endpoints; every change goes to the public Nacos API, so it is
// validated, persisted and pushed like any client's change. With auth on,
// the access token from the login is added to each call.

const TOKEN_KEY = 'registry.accessToken';

// A refused or failed call: the HTTP status and the server's plain text.
export class ApiError extends Error {
  constructor(status, text) {
    super(text || `HTTP ${status}`);
    this.status = status;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// Empty values are left out, except the names in `keep` (a form that
// must send a parameter even when it is empty).
function query(params, keep = []) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && (v !== '' || keep.includes(k))) q.set(k, String(v));
  }
  const t = token();
  if (t) q.set('accessToken', t);
  return q.toString();
}

// The body of a response, or an ApiError. A 403 means the token is
// missing or expired (except on the login itself, where it means a wrong
// password): the shell then asks for a login.
async function answer(response, isLogin = false) {
  const text = await response.text();
  if (!response.ok) {
    if (response.status === 403 && !isLogin) window.dispatchEvent(new CustomEvent('registry:denied'));
    throw new ApiError(response.status, text);
  }
  const type = response.headers.get('content-type') || '';
  return type.includes('json') ? JSON.parse(text) : text;
}

// GET `path` with `params`; JSON bodies are parsed.
export async function get(path, params = {}) {
  const q = query(params);
  return answer(await fetch(q ? `${path}?${q}` : path, { cache: 'no-store' }));
}

// A change through the Nacos API (`PATCH`, `PUT`, `DELETE` …), parameters in
// the query as Nacos clients send them.
export async function change(method, path, params, keep = []) {
  return answer(await fetch(`${path}?${query(params, keep)}`, { method, cache: 'no-store' }));
}

// Logs in; the password goes in the form body, never the URL.
export async function login(username, password) {
  const body = new URLSearchParams({ username, password });
  const r = await answer(await fetch('/nacos/v1/auth/login', { method: 'POST', body }), true);
  setToken(r.accessToken);
  return r;
}

// The server's Prometheus text (open even with auth on).
export async function metricsText() {
  const r = await fetch('/metrics', { cache: 'no-store' });
  if (!r.ok) throw new ApiError(r.status, await r.text());
  return r.text();
}

// Where the console's instance edits go: Nacos 3's partial update, which
// writes the operator's layer (weight, enabled) over what the client
// registered, so an edit outlives the client's next registration. The form
// resets what it is not sent, so each edit sends both fields.
export const LAYER = '/nacos/v3/admin/ns/instance/partial';

// The parameters that name one instance in the Nacos API.
export function instanceParams(service, inst) {
  return {
    namespaceId: service.namespaceId,
    serviceName: service.name,
    groupName: service.groupName,
    clusterName: inst.clusterName,
    ip: inst.ip,
    port: inst.port,
    ephemeral: inst.ephemeral,
  };
}
