// Namespaces and how many services each holds.

import { get } from './api.js';
import { el, table, viewLink } from './dom.js';

export async function render(root) {
  const r = await get('/nacos/v1/console/namespaces');
  root.replaceChildren(
    el('h1', {}, 'Namespaces'),
    table(['Namespace', '#Services'], r.data, (ns) => el('tr', { dataset: { namespace: ns.namespace } },
      el('td', {}, viewLink('services', { namespaceId: ns.namespace }, ns.namespaceShowName)),
      el('td', { class: 'num' }, ns.serviceCount.toLocaleString()))),
  );
}
