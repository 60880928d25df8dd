// Building the page from data without ever parsing HTML. Every string given
// to `el` or `append` becomes a text node, so a service name or a metadata
// value holding `<script>` or `<img onerror=…>` is shown as those
// characters and never runs. The console's modules use nothing else to put
// data on the page.

// Creates `<tag>` with properties and children. Properties: `class`,
// `dataset` (an object), `on<event>` (a function), DOM properties the
// element has (`value`, `type`, `disabled`, `href`, …), else attributes.
// Property names always come from our code, never from data.
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else if (key.startsWith('on') && typeof value === 'function') {
      node.addEventListener(key.slice(2), value);
    } else if (key in node) node[key] = value;
    else node.setAttribute(key, String(value));
  }
  append(node, children);
  return node;
}

// Appends children: nodes as they are, strings and numbers as text,
// arrays flattened, null/undefined/false skipped.
export function append(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else if (child instanceof Node) node.append(child);
    else node.append(document.createTextNode(String(child)));
  }
  return node;
}

// A table with a header row and one row per item; `row(item)` returns the
// `<tr>` (so it can carry data attributes the tests and actions use). A
// heading written `#Name` heads a numeric (right-aligned) column.
export function table(headings, items, row, empty = 'Nothing here.') {
  const body = el('tbody', {}, items.map(row));
  if (items.length === 0) {
    body.append(el('tr', {}, el('td', { colSpan: headings.length, class: 'muted' }, empty)));
  }
  return el('table', {},
    el('thead', {}, el('tr', {}, headings.map((h) => (h.startsWith('#')
      ? el('th', { scope: 'col', class: 'num' }, h.slice(1))
      : el('th', { scope: 'col' }, h))))),
    body);
}

// A yes/no badge whose class colours it.
export function badge(ok, yes, no, cls = ok ? 'ok' : 'bad') {
  return el('span', { class: `badge ${cls}` }, ok ? yes : no);
}

// "12 s ago" from a wall-clock millisecond time.
export function ago(ms) {
  if (ms === null || ms === undefined) return '—';
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 120) return `${s} s ago`;
  if (s < 7200) return `${Math.round(s / 60)} min ago`;
  return new Date(ms).toLocaleString();
}

// Bytes in binary units.
export function bytes(n) {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

// Shows a message in the notice bar; errors stay until the next message.
export function notify(text, kind = 'info') {
  const bar = document.getElementById('notice');
  bar.replaceChildren(el('span', { class: `notice ${kind}` }, text));
}

// A hash link to a console view with parameters.
export function viewLink(view, params, ...children) {
  const query = new URLSearchParams(params).toString();
  return el('a', { href: `#/${view}${query ? `?${query}` : ''}` }, ...children);
}
