// The login form, shown when the server runs with auth and the console has
// no valid token. The token is kept for this browser tab only.

import { login } from './api.js';
import { el, notify } from './dom.js';

export async function render(root, _params, shell) {
  const user = el('input', { id: 'login-user', name: 'username', autocomplete: 'username', required: true });
  const pass = el('input', {
    id: 'login-password', name: 'password', type: 'password', autocomplete: 'current-password', required: true,
  });
  const submit = el('button', { id: 'login-submit', type: 'submit' }, 'Log in');
  const form = el('form', {
    class: 'card narrow',
    onsubmit: async (event) => {
      event.preventDefault();
      submit.disabled = true;
      try {
        await login(user.value, pass.value);
        if (shell.onLogin) await shell.onLogin();
        location.hash = '#/services';
      } catch (e) {
        notify(`Login failed: ${e.message}`, 'error');
      } finally {
        submit.disabled = false;
      }
    },
  },
  el('h1', {}, 'Log in'),
  el('label', {}, 'User', user),
  el('label', {}, 'Password', pass),
  submit);
  root.replaceChildren(form);
  user.focus();
}
