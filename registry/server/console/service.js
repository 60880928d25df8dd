// One service: its settings (editable: protect threshold and metadata),
// clusters, instances with their actions (weight, enable/disable,
// deregister, take the IP offline everywhere) and subscribers (on every
// member of a cluster). Every
// change is a Nacos API call; the page then reads the service again.

import { get, change, instanceParams, LAYER } from './api.js';
import { el, table, badge, ago, notify, viewLink } from './dom.js';
import { setIpEnabled } from './services.js';

function metadataList(metadata) {
  const entries = Object.entries(metadata || {});
  if (entries.length === 0) return el('span', { class: 'muted' }, '—');
  return el('dl', { class: 'metadata' },
    entries.map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
}

// A button that asks for a second click before it acts.
function confirmButton(label, confirmLabel, cls, action) {
  const button = el('button', { type: 'button', class: cls }, label);
  button.addEventListener('click', async () => {
    if (button.dataset.armed !== 'yes') {
      button.dataset.armed = 'yes';
      button.textContent = confirmLabel;
      return;
    }
    button.disabled = true;
    await action();
  });
  return button;
}

function settingsCard(svc, reload) {
  const threshold = el('input', {
    id: 'protect-threshold', type: 'number', min: '0', max: '1', step: '0.01', value: String(svc.protectThreshold),
  });
  const metadata = el('textarea', { id: 'service-metadata', rows: 4, spellcheck: false },
    JSON.stringify(svc.metadata || {}, null, 2));
  const save = el('button', { id: 'service-save', type: 'submit' }, 'Save');
  return el('form', {
    class: 'card',
    onsubmit: async (event) => {
      event.preventDefault();
      let meta;
      try {
        meta = JSON.parse(metadata.value || '{}');
      } catch (e) {
        notify(`Metadata must be a JSON object: ${e.message}`, 'error');
        return;
      }
      try {
        await change('PUT', '/nacos/v1/ns/service', {
          namespaceId: svc.namespaceId,
          serviceName: svc.name,
          groupName: svc.groupName,
          protectThreshold: threshold.value,
          metadata: JSON.stringify(meta),
          selector: JSON.stringify(svc.selector || { type: 'none' }),
        });
        notify('Service settings saved.', 'ok');
        await reload();
      } catch (e) {
        notify(`Could not save: ${e.message}`, 'error');
      }
    },
  },
  el('h2', {}, 'Settings'),
  el('div', { class: 'settings' },
    el('div', {}, el('h3', {}, 'Metadata'), metadataList(svc.metadata)),
    el('div', {},
      el('label', {}, 'Protect threshold (0–1)', threshold),
      el('label', {}, 'Metadata (JSON object)', metadata),
      save)));
}

function instanceRow(svc, inst, reload) {
  const addr = `${inst.ip}:${inst.port}`;
  const act = async (what, fn) => {
    try {
      await fn();
      notify(`${addr}: ${what}.`, 'ok');
    } catch (e) {
      notify(`${addr}: could not ${what}: ${e.message}`, 'error');
    }
    await reload();
  };
  const weight = el('input', {
    class: 'weight', type: 'number', min: '0', max: '10000', step: '0.1', value: String(inst.weight),
  });
  const setWeight = el('button', {
    type: 'button',
    class: 'act-weight',
    onclick: () => act(`weight set to ${weight.value}`, () => change('PUT', LAYER, {
      ...instanceParams(svc, inst), weight: weight.value, enabled: inst.enabled,
    })),
  }, 'Set');
  const toggle = el('button', {
    type: 'button',
    class: inst.enabled ? 'act-disable danger' : 'act-enable',
    onclick: () => act(inst.enabled ? 'disabled' : 'enabled', () => change('PUT', LAYER, {
      ...instanceParams(svc, inst), weight: inst.weight, enabled: !inst.enabled,
    })),
  }, inst.enabled ? 'Disable' : 'Enable');
  const deregister = confirmButton('Deregister', 'Really deregister?', 'act-deregister danger',
    () => act('deregistered', () => change('DELETE', '/nacos/v1/ns/instance', instanceParams(svc, inst))));
  const offline = confirmButton('IP offline everywhere', `Disable every ${inst.ip}?`, 'act-ip-offline',
    () => act(`every instance of ${inst.ip} disabled`, async () => {
      const r = await setIpEnabled(inst.ip, false, '');
      if (r.failed.length) throw new Error(r.failed.join('; '));
    }));
  return el('tr', { class: 'instance-row', dataset: { addr, cluster: inst.clusterName } },
    el('td', {}, inst.clusterName),
    el('td', { class: 'mono' }, addr),
    el('td', { class: 'health' }, badge(inst.healthy, 'healthy', 'unhealthy')),
    el('td', { class: 'enabled' }, badge(inst.enabled, 'enabled', 'disabled', inst.enabled ? 'ok' : 'off')),
    el('td', { class: 'weight-cell' }, weight, setWeight),
    el('td', {}, inst.ephemeral ? 'ephemeral' : 'persistent'),
    el('td', { class: 'metadata-cell' }, metadataList(inst.metadata)),
    el('td', { class: 'last-beat' }, inst.ephemeral ? ago(inst.lastBeat) : 'checked by server'),
    el('td', { class: 'actions' }, toggle, deregister, offline));
}

export async function render(root, params) {
  const ident = {
    namespaceId: params.namespaceId || 'public',
    serviceName: params.serviceName || '',
    groupName: params.groupName || 'DEFAULT_GROUP',
  };
  const reload = () => render(root, params);
  const [detail, instances, subs] = await Promise.all([
    get('/nacos/v1/ns/catalog/service', ident),
    get('/nacos/v1/ns/catalog/instances', { ...ident, pageSize: 1000 }),
    get('/nacos/v1/ns/service/subscribers', { ...ident, pageSize: 1000 }),
  ]);
  const svc = detail.service;
  // `replaceChildren` would show a skipped (null) part as the text "null".
  root.replaceChildren(...[
    el('p', {}, viewLink('services', { namespaceId: svc.namespaceId }, '‹ All services')),
    el('h1', { id: 'service-title' }, el('span', { class: 'muted' }, `${svc.groupName} / `), svc.name,
      el('span', { class: 'muted small' }, ` in ${svc.namespaceId}, revision ${svc.revision}`)),
    settingsCard(svc, reload),
    el('h2', {}, 'Clusters'),
    table(['Cluster', '#Instances', '#Healthy'], detail.clusters, (c) => el('tr', {},
      el('td', {}, c.name), el('td', { class: 'num' }, c.instanceCount), el('td', { class: 'num' }, c.healthyCount))),
    el('h2', {}, `Instances (${instances.count})`),
    table(['Cluster', 'Address', 'Health', 'Traffic', 'Weight', 'Kind', 'Metadata', 'Last beat', 'Actions'],
      instances.list, (inst) => instanceRow(svc, inst, reload), 'No instances.'),
    instances.count > instances.list.length
      ? el('p', { class: 'muted' }, `Showing the first ${instances.list.length} of ${instances.count}.`) : null,
    el('h2', {}, `Subscribers (${subs.count})`),
    // Every member's subscribers (the API gathers them); a member that did
    // not answer is named, so a short list is never mistaken for a whole one.
    (subs.unreachable || []).length
      ? el('p', { class: 'notice error', id: 'subscribers-unreachable' },
        `Not counted: ${subs.unreachable.map((u) => `${u.node} (${u.error})`).join('; ')}`) : null,
    table(['Node', 'Address', 'Protocol', 'Client version', 'Clusters', 'Healthy only', '#Lease left'], subs.subscribers,
      (s) => el('tr', { class: 'subscriber-row', dataset: { addr: s.addrStr, node: s.node } },
        el('td', { class: 'mono' }, s.node),
        el('td', { class: 'mono' }, s.addrStr),
        el('td', {}, s.protocol),
        el('td', {}, s.agent || '—'),
        el('td', {}, s.clusters || 'all'),
        el('td', {}, s.healthyOnly ? 'yes' : 'no'),
        el('td', { class: 'num' }, `${Math.round(s.expiresInMs / 1000)} s`)),
      'No live subscribers.'),
  ].filter(Boolean));
}
