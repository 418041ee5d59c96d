// Nylon console: the node drawer and the live feed (Channels websocket /ws/events/).
(function () {
  "use strict";

  // Translated strings, embedded by the page as JSON (frontend.views.base.js_strings).
  var strings = null;
  window.nylonT = function (key, params) {
    if (strings === null) {
      var el = document.getElementById("console-i18n");
      try { strings = el ? JSON.parse(el.textContent) : {}; } catch (e) { strings = {}; }
    }
    var s = strings[key] || key;
    Object.keys(params || {}).forEach(function (k) { s = s.split("%(" + k + ")s").join(String(params[k])); });
    return s;
  };

  window.nylonCloseDrawer = function () {
    var d = document.getElementById("drawer");
    if (d) { d.hidden = true; d.innerHTML = ""; }
  };

  document.addEventListener("htmx:afterSwap", function (ev) {
    if (ev.detail.target && ev.detail.target.id === "drawer") { ev.detail.target.hidden = false; }
  });
  document.addEventListener("keydown", function (ev) { if (ev.key === "Escape") { window.nylonCloseDrawer(); } });

  // The org this page was rendered for (base.html <meta name="nylon-org">) goes with every form it
  // posts, as the field nylon_org: the server refuses (409) a change sent from a page of another
  // org than the session's, i.e. after a switch in another tab (frontend.console.console_view).
  // "formdata" fires for a submit button, for form.submit() (the org and role selects) and for
  // htmx's own FormData alike; htmx requests carry the header X-Nylon-Page-Org too (<body hx-headers>).
  document.addEventListener("formdata", function (ev) {
    var form = ev.target, meta = document.querySelector('meta[name="nylon-org"]');
    if (!(form instanceof HTMLFormElement) || form.method !== "post" || !meta) { return; }
    if (!ev.formData.has("nylon_org")) { ev.formData.append("nylon_org", meta.content); }
  });

  // Confirmations, one way for every destructive action. A form with data-confirm asks before it
  // is sent; its checked radio with a data-confirm of its own says first what that choice does
  // ("%(team)s": the option chosen in the select whose id is the radio's data-confirm-team). A
  // select with data-confirm-change ("%(choice)s": the new option) asks before its form is sent and
  // goes back to its saved value (data-value) when the answer is no.
  function confirmText(form) {
    var parts = [];
    var choice = form.querySelector("input[type=radio][data-confirm]:checked");
    if (choice) {
      var text = choice.dataset.confirm;
      var select = choice.dataset.confirmTeam && document.getElementById(choice.dataset.confirmTeam);
      if (select && select.selectedIndex >= 0) {
        text = text.split("%(team)s").join(select.options[select.selectedIndex].text);
      }
      parts.push(text);
    }
    if (form.dataset.confirm) { parts.push(form.dataset.confirm); }
    return parts.join(" ");
  }

  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (!(form instanceof HTMLFormElement) || form.dataset.confirm === undefined) { return; }
    if (!window.confirm(confirmText(form))) { ev.preventDefault(); ev.stopImmediatePropagation(); }
  }, true);

  document.addEventListener("change", function (ev) {
    var el = ev.target;
    if (!(el instanceof HTMLSelectElement) || el.dataset.confirmChange === undefined) { return; }
    var label = el.options[el.selectedIndex].text;
    if (window.confirm(el.dataset.confirmChange.split("%(choice)s").join(label))) {
      el.form.submit();
    } else {
      el.value = el.dataset.value;  // the saved value: an accepted change sends the form at once
    }
  });

  var status, list, retry = 1000;

  function setLive(on) {
    if (!status) { return; }
    status.classList.toggle("live", on);
    status.title = window.nylonT(on ? "live" : "disconnected");
    document.body.dataset.feed = on ? "live" : "down";
  }

  function addLine(html) {
    var empty = document.getElementById("feed-empty");
    if (empty) { empty.remove(); }
    var tmp = document.createElement("ul");
    tmp.innerHTML = html;
    var items = Array.prototype.slice.call(tmp.children).reverse();
    items.forEach(function (li) {
      li.classList.add("fresh");
      list.insertBefore(li, list.firstChild);
      if (window.htmx) { window.htmx.process(li); }
    });
    while (list.children.length > 100) { list.removeChild(list.lastChild); }
  }

  function onEvent(ev) {
    if (ev.type === "memory.woven" && ev.node_ids && ev.node_ids.length) {
      // The event names ids only; the server renders the ones this user may see.
      var url = document.body.dataset.feedUrl + "?ids=" + ev.node_ids.join(",");
      fetch(url, { credentials: "same-origin", headers: { "HX-Request": "true" } })
        .then(function (r) { return r.ok ? r.text() : ""; })
        .then(function (html) { if (html.trim()) { addLine(html); } });
      // An unfiltered memory browser on its first page also gets the new rows.
      var rows = document.getElementById("node-rows");
      if (rows && !location.search) {
        fetch(url + "&as=rows", { credentials: "same-origin", headers: { "HX-Request": "true" } })
          .then(function (r) { return r.ok ? r.text() : ""; })
          .then(function (html) {
            if (!html.trim()) { return; }
            var tmp = document.createElement("tbody");
            tmp.innerHTML = html;
            Array.prototype.slice.call(tmp.querySelectorAll("tr.node-row")).reverse().forEach(function (tr) {
              if (rows.querySelector("tr[data-node-id='" + tr.dataset.nodeId + "']")) { return; }
              tr.classList.add("fresh");
              rows.insertBefore(tr, rows.firstChild);
              if (window.htmx) { window.htmx.process(tr); }
            });
            var none = rows.querySelector("td[colspan]");
            if (none && !none.querySelector("a")) { none.parentNode.remove(); }
          });
      }
    } else if (ev.type) {
      var li = document.createElement("li");
      li.className = "feed-item muted";
      li.textContent = ev.type + (ev.node_id ? " #" + ev.node_id : "");
      addLine(li.outerHTML);
    }
  }

  function connect() {
    var proto = location.protocol === "https:" ? "wss://" : "ws://";
    var ws = new WebSocket(proto + location.host + "/ws/events/");
    ws.onopen = function () { retry = 1000; setLive(true); };
    ws.onmessage = function (m) { try { onEvent(JSON.parse(m.data)); } catch (e) { /* ignore bad frames */ } };
    ws.onclose = function (e) {
      setLive(false);
      if (e.code === 4401 || e.code === 4403) { return; }  // signed out / no org: do not hammer
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 30000);
    };
  }

  document.addEventListener("DOMContentLoaded", function () {
    status = document.getElementById("feed-status");
    list = document.getElementById("feed-list");
    if (list && window.WebSocket) { connect(); }
  });
})();
