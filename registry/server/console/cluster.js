// Cluster members and their states, from `/nacos/v1/core/cluster/nodes`
// (Nacos's shape: `{code, data: [{address, state, extendInfo}]}`). The page
// is offered only when a server answers that endpoint.

import { get } from './api.js';
import { el, table, badge } from './dom.js';

// The member list in a Nacos envelope or bare; `null` for anything else.
export function membersOf(body) {
  if (Array.isArray(body)) return body;
  if (body && Array.isArray(body.data)) return body.data;
  return null;
}

export async function render(root) {
  const members = membersOf(await get('/nacos/v1/core/cluster/nodes')) || [];
  root.replaceChildren(
    el('h1', {}, 'Cluster members'),
    table(['Address', 'State', 'Details'], members, (m) => el('tr', { dataset: { address: m.address || '' } },
      el('td', { class: 'mono' }, m.address || `${m.ip}:${m.port}`),
      el('td', {}, badge(m.state === 'UP', m.state, m.state || 'unknown')),
      el('td', { class: 'mono small' }, m.extendInfo ? JSON.stringify(m.extendInfo) : ''))),
  );
}
