// Cluster members and their states, from `/nacos/v1/core/cluster/nodes`
// (Nacos 1.4's shape: `{code, data: [{address, state, extendInfo:
// {lastRefreshTime}, failAccessCnt}]}`). The shell offers this page only
// when the server answers that endpoint. Members are added and removed
// through `POST`/`DELETE /nacos/v1/core/cluster/member?address=` (the Raft
// group's membership change; the server says why when it cannot).

import { get, change } from './api.js';
import { el, table, badge, ago, notify } from './dom.js';

const MEMBER = '/nacos/v1/core/cluster/member';

// The member list in a Nacos envelope or bare; `null` for anything else.
export function membersOf(body) {
  if (Array.isArray(body)) return body;
  if (body && Array.isArray(body.data)) return body.data;
  return null;
}

// Sends one membership change and reports the outcome; reloads the page.
async function changeMember(root, method, address) {
  try {
    await change(method, MEMBER, { address });
    notify(`${method === 'POST' ? 'Added' : 'Removed'} ${address}.`);
  } catch (e) {
    notify(`Membership change refused: ${e.message}`, 'error');
  }
  await render(root);
}

// A remove button that asks for a second click before it acts.
function removeButton(root, address) {
  const button = el('button', { type: 'button', class: 'danger member-remove' }, 'Remove');
  button.addEventListener('click', async () => {
    if (button.dataset.armed !== 'yes') {
      button.dataset.armed = 'yes';
      button.textContent = `Remove ${address}?`;
      return;
    }
    button.disabled = true;
    await changeMember(root, 'DELETE', address);
  });
  return button;
}

function addForm(root) {
  const input = el('input', { id: 'member-address', placeholder: 'ip:port of a node started with --cluster-join' });
  const form = el('form', { id: 'member-add', class: 'inline' }, input,
    el('button', { type: 'submit' }, 'Add member'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (input.value.trim()) await changeMember(root, 'POST', input.value.trim());
  });
  return form;
}

export async function render(root) {
  const members = membersOf(await get('/nacos/v1/core/cluster/nodes')) || [];
  root.replaceChildren(
    el('h1', {}, 'Cluster members'),
    table(['Address', 'State', 'Last successful probe', '#Failed probes in a row', ''], members,
      (m) => {
        const refreshed = m.extendInfo && m.extendInfo.lastRefreshTime;
        const address = m.address || `${m.ip}:${m.port}`;
        return el('tr', { class: 'member-row', dataset: { address: m.address || '' } },
          el('td', { class: 'mono' }, address),
          el('td', {}, badge(m.state === 'UP', m.state, m.state || 'unknown')),
          el('td', {}, refreshed ? ago(refreshed) : 'never'),
          el('td', { class: 'num' }, m.failAccessCnt ?? '—'),
          el('td', {}, removeButton(root, address)));
      }, 'No members.'),
    addForm(root),
  );
}
