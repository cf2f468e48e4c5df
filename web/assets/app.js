// cryochamber dashboard: the page's only script. It never turns text into markup: every line
// and message it adds is set with textContent, and what it takes from the server's own pages is
// parsed by DOMParser (whose scripts never run) from HTML the server escaped.
'use strict';
(() => {
  const meta = document.querySelector('meta[name="cryo-token"]');
  const token = meta ? meta.content : '';
  const page = document.body.dataset.page;
  const chamber = document.body.dataset.chamber;
  const notice = document.getElementById('notice');
  const api = (what) => '/api/chambers/' + encodeURIComponent(chamber) + '/' + what;
  // An EventSource cannot send a header: its URL carries the token, as the page's links do
  // (never a cookie, which every port of 127.0.0.1 would receive).
  const withToken = (path) => path + '?token=' + encodeURIComponent(token);

  function say(text) { if (notice) notice.textContent = text; }

  // A change is a POST with the token in a header: another site's page cannot send one.
  async function post(path, data) {
    const r = await fetch(path, {
      method: 'POST', credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', 'X-Cryo-Token': token },
      body: JSON.stringify(data || {}),
    });
    let j = {};
    try { j = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error((j.error || r.statusText) + (j.hint ? '\nhint: ' + j.hint : ''));
    return j;
  }

  // Reload the parts of the page marked data-region from the server, leaving the rest (what
  // is being typed, the live output) alone.
  let busy = null, again = false, toEnd = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = (async () => {
      const r = await fetch(location.href, { credentials: 'same-origin', headers: { Accept: 'text/html', 'X-Cryo-Token': token } });
      if (!r.ok) return;
      const doc = new DOMParser().parseFromString(await r.text(), 'text/html');
      for (const el of document.querySelectorAll('[data-region]')) {
        const fresh = doc.getElementById(el.id);
        if (!fresh) continue;
        // The conversation stays at its newest message when it was there (or after a Send).
        const atEnd = el.id === 'conversation' && (toEnd || el.scrollTop + el.clientHeight >= el.scrollHeight - 4);
        const node = document.importNode(fresh, true);
        el.replaceWith(node);
        if (atEnd) node.scrollTop = node.scrollHeight;
      }
      toEnd = false;
    })().catch(() => {}).finally(() => {
      busy = null;
      if (again) { again = false; refresh(); }
    });
  }
  let timer = null;
  function soon() { clearTimeout(timer); timer = setTimeout(refresh, 250); }

  async function act(button, path, data, done) {
    if (button) button.disabled = true;
    try {
      const j = await post(path, data);
      say(j.output || 'done');
      if (done) done();
      soon();
    } catch (e) {
      say('cryochamber: ' + e.message);
    } finally {
      if (button) button.disabled = false;
    }
  }

  // A button with data-action="ask" shows the confirmation (or the form) data-target names;
  // "keep" hides it again. The change itself is made by the button inside it.
  function shown(id, on) {
    const el = document.getElementById(id);
    if (el) el.hidden = !on;
    return el;
  }
  function field(id, name) {
    const el = document.getElementById(id);
    const input = el && el.querySelector('input[name="' + name + '"]');
    return input ? input.value.trim() : '';
  }
  document.addEventListener('click', (ev) => {
    const b = ev.target.closest('[data-action]');
    if (!b || !chamber) return;
    switch (b.dataset.action) {
      case 'ask': shown(b.dataset.target, true); break;
      case 'keep': shown(b.dataset.target, false); break;
      case 'wake': act(b, api('wake')); break;
      case 'move': act(b, api('wake'), { at: field('move-form', 'at') }, () => shown('move-form', false)); break;
      case 'pause': {
        const until = field('pause-form', 'until');
        act(b, api('pause'), until ? { until: until } : {}, () => shown('pause-form', false));
        break;
      }
      case 'resume': act(b, api('resume')); break;
      case 'cancel': act(b, api('cancel'), {}, () => shown('cancel-confirm', false)); break;
    }
  });

  const form = document.getElementById('send');
  if (form) {
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const text = form.elements.text.value;
      if (!text.trim()) return;
      act(form.querySelector('button[type=submit]'), api('send'),
        { text: text, wake: form.elements.wake.checked },
        () => { form.elements.text.value = ''; toEnd = true; });
    });
  }
  // A conversation opens at its newest message, as a chat does.
  const talk = document.getElementById('conversation');
  if (talk) talk.scrollTop = talk.scrollHeight;

  // The live output of the latest block, as the log is followed.
  const live = document.getElementById('live');
  const liveTitle = document.getElementById('live-title');
  const maxLines = 2000;
  function addLine(text) {
    const d = document.createElement('div');
    const k = text[0];
    d.className = 'l ' + (k === '|' ? 'l-out' : k === '!' ? 'l-err' : k === '-' ? 'l-header' : 'l-note');
    const t = document.createElement('span');
    t.className = 't';
    // As the server does for its pages: bidirectional and zero-width controls are shown as
    // U+FFFD, never obeyed.
    const shown = text.replace(/[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u200b-\u200d\u2060\ufeff]/g, '\ufffd');
    t.textContent = (k === '|' || k === '!' || k === '#') ? shown.replace(/^[|!#] ?/, '') : shown;
    d.appendChild(t);
    live.appendChild(d);
  }
  if (page === 'chamber' && live && window.EventSource) {
    const es = new EventSource(withToken(api('events')));
    es.addEventListener('log', (e) => {
      const b = JSON.parse(e.data);
      const atEnd = live.scrollTop + live.clientHeight >= live.scrollHeight - 4;
      if (b.reset) {
        live.replaceChildren();
        if (liveTitle) liveTitle.textContent = '(session ' + b.session + ')';
      }
      if (b.skipped) addLine('# ' + b.skipped + ' line(s) not shown');
      for (const l of b.lines) addLine(l);
      while (live.childElementCount > maxLines) live.firstElementChild.remove();
      if (atEnd) live.scrollTop = live.scrollHeight;
    });
    es.addEventListener('changed', soon);
  }
  if (page === 'overview' && window.EventSource) {
    const es = new EventSource(withToken('/api/events'));
    es.addEventListener('changed', soon);
  }
})();
