// Namespaces and how many services each holds; create one, delete one.
// Both changes go to the v3 admin namespace API (NamespaceControllerV3),
// whose refusals say why (an id taken, a namespace still holding
// services: the server refuses that delete).

import { get, change } from './api.js';
import { el, table, notify, viewLink } from './dom.js';

const NS_API = '/nacos/v3/admin/core/namespace';

// The reason in a refused call's `Result` envelope, else its text.
function reason(e) {
  try {
    const r = JSON.parse(e.message);
    return r.data || r.message || e.message;
  } catch {
    return e.message;
  }
}

function createForm(reload) {
  const id = el('input', { id: 'ns-id', placeholder: 'id (empty: a generated one)', maxLength: 128 });
  const name = el('input', { id: 'ns-name', placeholder: 'name', required: true, maxLength: 128 });
  const desc = el('input', { id: 'ns-desc', placeholder: 'description' });
  return el('form', {
    class: 'card',
    onsubmit: async (event) => {
      event.preventDefault();
      try {
        // The form wants `namespaceId` sent; empty asks the server to make one up.
        await change('POST', NS_API, {
          namespaceId: id.value.trim(), namespaceName: name.value.trim(), namespaceDesc: desc.value.trim(),
        }, ['namespaceId']);
        notify(`Namespace ${name.value.trim()} created.`, 'ok');
        await reload();
      } catch (e) {
        notify(`Could not create the namespace: ${reason(e)}`, 'error');
      }
    },
  },
  el('h2', {}, 'New namespace'),
  el('div', { class: 'settings' }, id, name, desc,
    el('button', { id: 'ns-create', type: 'submit' }, 'Create')));
}

// A delete button that asks for a second click before it acts.
function deleteButton(ns, reload) {
  const button = el('button', { type: 'button', class: 'ns-delete danger' }, 'Delete');
  button.addEventListener('click', async () => {
    if (button.dataset.armed !== 'yes') {
      button.dataset.armed = 'yes';
      button.textContent = 'Really delete?';
      return;
    }
    button.disabled = true;
    try {
      await change('DELETE', NS_API, { namespaceId: ns.namespace });
      notify(`Namespace ${ns.namespace} deleted.`, 'ok');
    } catch (e) {
      notify(`Could not delete ${ns.namespace}: ${reason(e)}`, 'error');
    }
    await reload();
  });
  return button;
}

export async function render(root) {
  const r = await get('/nacos/v1/console/namespaces');
  const reload = () => render(root);
  root.replaceChildren(
    el('h1', {}, 'Namespaces'),
    table(['Namespace', 'Id', 'Actions', '#Services'], r.data, (ns) => el('tr', { dataset: { namespace: ns.namespace } },
      el('td', {}, viewLink('services', { namespaceId: ns.namespace }, ns.namespaceShowName)),
      el('td', { class: 'mono' }, ns.namespace),
      // The default namespace is always there.
      el('td', { class: 'actions' }, ns.type === 0 ? el('span', { class: 'muted' }, 'default') : deleteButton(ns, reload)),
      el('td', { class: 'num services' }, ns.serviceCount.toLocaleString()))),
    createForm(reload),
  );
}
