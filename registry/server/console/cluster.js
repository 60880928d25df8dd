// Cluster members and their states, from `/nacos/v1/core/cluster/nodes`
// (Nacos 1.4's shape: `{code, data: [{address, state, extendInfo:
// {lastRefreshTime}, failAccessCnt}]}`). The shell offers this page only
// when the server answers that endpoint.

import { get } from './api.js';
import { el, table, badge, ago } from './dom.js';

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
    table(['Address', 'State', 'Last successful probe', '#Failed probes in a row'], members,
      (m) => {
        const refreshed = m.extendInfo && m.extendInfo.lastRefreshTime;
        return el('tr', { class: 'member-row', dataset: { address: m.address || '' } },
          el('td', { class: 'mono' }, m.address || `${m.ip}:${m.port}`),
          el('td', {}, badge(m.state === 'UP', m.state, m.state || 'unknown')),
          el('td', {}, refreshed ? ago(refreshed) : 'never'),
          el('td', { class: 'num' }, m.failAccessCnt ?? '—'));
      }, 'No members.'),
  );
}
