// The navigation probe: see PROBE_SCRIPT in navigation.py. @NAME@ marks are filled in there.
(() => {
  if (window !== window.top || !('navigation' in window) || '@PROBE_NAME@' in window) return;
  const serialize = XMLSerializer.prototype.serializeToString;
  const outer = Object.getOwnPropertyDescriptor(Element.prototype, 'outerHTML').get;
  const serializer = new XMLSerializer();
  const html = () => (document.doctype ? serialize.call(serializer, document.doctype) : '')
    + (document.documentElement ? outer.call(document.documentElement) : '');
  const leaving = [];
  const origin = performance.timeOrigin;
  const entries = performance.getEntriesByType.bind(performance);
  const status = () => {
    const entry = entries('navigation')[0];
    return entry ? entry.responseStatus : 0;
  };
  navigation.addEventListener('navigate', (event) => {
    if (!event.destination.sameDocument) leaving.push(event.destination.url);
  });
  Object.defineProperty(window, '@PROBE_NAME@', {
    value: Object.freeze((withHtml) => {
      const seen = [origin, status(), location.href, leaving.slice()];
      return withHtml ? [...seen, html()] : seen;
    }),
  });
  const now = performance.now.bind(performance);
  const setTimer = window.setTimeout.bind(window);
  const clearTimer = window.clearTimeout.bind(window);
  const waiters = new Set();
  let pending = 0;
  let lastActivity = -1;
  const changed = () => {
    lastActivity = now();
    for (const wake of waiters) wake();
    waiters.clear();
  };
  const begin = () => { pending += 1; };
  const end = () => { pending -= 1; if (pending === 0) changed(); };
  const observer = new MutationObserver(changed);
  const observe = () => observer.observe(document,
    { childList: true, subtree: true, characterData: true });
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', observe, { once: true });
  } else {
    observe();
  }
  const timers = new Set();
  window.setTimeout = new Proxy(window.setTimeout, {
    apply(target, self, args) {
      const [callback, delay, ...rest] = args;
      if (typeof callback !== 'function' || !(Number(delay ?? 0) <= @TIMER_HORIZON_MS@)) {
        return Reflect.apply(target, self, args);
      }
      begin();
      const id = Reflect.apply(target, self, [function (...given) {
        try { return callback.apply(this, given); }
        finally { if (timers.delete(id)) end(); }
      }, delay, ...rest]);
      timers.add(id);
      return id;
    },
  });
  window.clearTimeout = new Proxy(window.clearTimeout, {
    apply(target, self, args) {
      if (timers.delete(args[0])) end();
      return Reflect.apply(target, self, args);
    },
  });
  window.fetch = new Proxy(window.fetch, {
    apply(target, self, args) {
      begin();
      try {
        const answer = Reflect.apply(target, self, args);
        answer.then(end, end);
        return answer;
      } catch (error) { end(); throw error; }
    },
  });
  const send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.send = new Proxy(send, {
    apply(target, self, args) {
      begin();
      self.addEventListener('loadend', end, { once: true });
      try { return Reflect.apply(target, self, args); } catch (error) {
        self.removeEventListener('loadend', end);
        end();
        throw error;
      }
    },
  });
  const settled = (quietMs) => document.readyState !== 'loading' && pending === 0
    && (lastActivity < 0 || now() - lastActivity >= quietMs);
  Object.defineProperty(window, '@SETTLE_NAME@', {
    value: Object.freeze((quietMs, maxMs) => new Promise((resolve) => {
      const until = now() + maxMs;
      const check = () => {
        if (settled(quietMs)) return resolve(true);
        if (now() >= until) return resolve(false);
        setTimer(check, @SETTLE_POLL_MS@);
      };
      check();
    })),
  });
  Object.defineProperty(window, '@CHANGE_NAME@', {
    value: Object.freeze((maxMs) => new Promise((resolve) => {
      const timer = setTimer(() => { waiters.delete(wake); resolve(false); }, maxMs);
      const wake = () => { clearTimer(timer); resolve(true); };
      waiters.add(wake);
    })),
  });
})();
