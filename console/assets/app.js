// xds-server console: polls one JSON endpoint per page (at most once a
// second) and redraws the page with tables and plain SVG charts. Without
// this script each page is a server-rendered table.
"use strict";
(function () {
  const body = document.body;
  const page = body.dataset.page;
  const service = body.dataset.service;
  const main = document.getElementById("main");
  const statusEl = document.getElementById("status");
  const TOKEN_KEY = "xds-server-admin-token";
  let chosenNode = "";
  let tick = 0;
  let history = null;
  let flash = null; // {ok, text} of the last drain action

  const esc = (s) => String(s == null ? "" : s).replace(/[&<>"']/g, (c) =>
    ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const fmt = (x, d) => (x == null || isNaN(x) ? "–" : Number(x).toFixed(d == null ? 2 : d));
  const pct = (x) => fmt(100 * x, 1) + "%";

  function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }
  function headers(extra) {
    const h = Object.assign({}, extra || {});
    if (token()) h["Authorization"] = "Bearer " + token();
    return h;
  }
  function askToken(msg) {
    const form = document.getElementById("token-form");
    form.hidden = false;
    statusEl.textContent = msg;
  }
  document.getElementById("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = document.getElementById("token");
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    input.value = "";
    document.getElementById("token-form").hidden = true;
    poll(true);
  });

  function apiURL() {
    switch (page) {
      case "fleet": return "/ui/api/fleet";
      case "drains": return "/ui/api/drains";
      case "ratelimit": return "/ui/api/ratelimit";
      case "service": {
        const q = new URLSearchParams();
        if (chosenNode) q.set("node", chosenNode);
        if (history === null || tick % 10 === 0) q.set("history", "1");
        return "/ui/api/services/" + encodeURIComponent(service) + "?" + q;
      }
    }
    return null;
  }

  let timer = null;
  async function poll(now) {
    clearTimeout(timer);
    const url = apiURL();
    if (!url) return;
    if (body.dataset.token === "required" && !token()) { askToken("token needed"); return; }
    if (!now && document.hidden) { timer = setTimeout(poll, 1000); return; }
    try {
      const resp = await fetch(url, { headers: headers(), cache: "no-store" });
      if (resp.status === 401) { sessionStorage.removeItem(TOKEN_KEY); askToken("token refused"); return; }
      const data = await resp.json();
      if (!resp.ok) { main.innerHTML = '<p class="error">' + esc(data.error || resp.statusText) + "</p>"; }
      else { render(data); statusEl.textContent = "live · " + new Date().toLocaleTimeString(); }
    } catch (e) {
      statusEl.textContent = "not reachable: " + e.message;
    }
    tick++;
    timer = setTimeout(poll, 1000);
  }

  let nodeList = null;
  // part fills element id of main, creating the page's skeleton first;
  // parts not redrawn (the drain form, the node choice) keep their state.
  function part(id, html) {
    if (!document.getElementById(id)) {
      main.innerHTML = (page === "service" ? ["live", "nodesel", "nodeview", "hist"] : ["controls", "live"]).map((x) => '<div id="' + x + '"></div>').join("");
      nodeList = null;
    }
    document.getElementById(id).innerHTML = html;
  }

  function render(d) {
    if (page === "fleet") part("live", fleet(d));
    if (page === "ratelimit") part("live", rateLimits(d));
    if (page === "drains") {
      if (!document.getElementById("drain-form")) part("controls", drainForm());
      part("live", drains(d));
    }
    if (page === "service") {
      if (d.history) history = d.history;
      part("live", serviceView(d));
      const ids = d.subsets ? d.subsets.known_nodes + "\n" + d.subsets.nodes.join("\n") : "";
      if (ids !== nodeList) { part("nodesel", nodeSelect(d.subsets)); nodeList = ids; }
      part("nodeview", nodeView(d.subsets));
      part("hist", historyHTML());
    }
  }

  function table(id, heads, rows) {
    return '<table' + (id ? ' id="' + id + '"' : "") + "><thead><tr>" + heads.map((h) => "<th>" + esc(h) + "</th>").join("") +
      "</tr></thead><tbody>" + rows.map((r) => "<tr>" + r.map((c) => "<td>" + c + "</td>").join("") + "</tr>").join("") + "</tbody></table>";
  }
  const kv = (m) => Object.keys(m || {}).sort().map((k) => [esc(k), esc(m[k])]);

  // healthBar is one stacked bar of a service's endpoints by health.
  function healthBar(s) {
    const parts = [["healthy", s.healthy], ["degraded", s.degraded], ["draining", s.draining], ["unhealthy", s.unhealthy]];
    let x = 0; const w = 200; const out = [];
    for (const [cls, n] of parts) {
      if (!n || !s.endpoints) continue;
      const bw = (w * n) / s.endpoints;
      out.push('<rect class="' + cls + '" x="' + x.toFixed(1) + '" y="0" width="' + bw.toFixed(1) + '" height="12"><title>' + n + " " + cls + "</title></rect>");
      x += bw;
    }
    return '<svg class="healthbar" width="' + w + '" height="12" viewBox="0 0 ' + w + ' 12">' + out.join("") + "</svg>";
  }

  function histogram(buckets) {
    const n = buckets.length;
    if (!n) return '<p class="muted">no discovery change pushed yet</p>';
    const top = Math.max(1, ...buckets.map((b) => b.count));
    const bw = 36, h = 80; // wide enough for a "250ms" tick
    const bars = buckets.map((b, i) => {
      const bh = (h * b.count) / top;
      const le = b.le == null ? "+Inf" : b.le < 1 ? (b.le * 1000).toFixed(0) + "ms" : b.le + "s";
      return '<rect class="bar" x="' + i * bw + '" y="' + (h - bh).toFixed(1) + '" width="' + (bw - 3) + '" height="' + bh.toFixed(1) + '"><title>≤ ' + le + ": " + b.count + "</title></rect>" +
        '<text x="' + (i * bw + bw / 2) + '" y="' + (h + 12) + '" class="tick">' + esc(le) + "</text>";
    }).join("");
    return '<svg id="push-latency" width="' + n * bw + '" height="' + (h + 16) + '">' + bars + "</svg>";
  }

  function fleet(d) {
    const svcs = d.services.map((s) => ['<a href="/ui/services/' + encodeURIComponent(s.name) + '">' + esc(s.name) + "</a>",
      s.endpoints, healthBar(s), s.healthy, s.degraded, s.draining, s.unhealthy]);
    const disc = d.discovery.map((s) => [esc(s.source), s.stale ? '<b class="bad">STALE</b>' : "fresh",
      s.last_success ? esc(new Date(s.last_success).toLocaleTimeString()) : "never", s.errors]);
    const dcs = (d.datacenters || []).map((s) => [esc(s.datacenter),
      s.stale ? '<b class="bad">STALE</b> since ' + esc(new Date(s.stale_since).toLocaleTimeString()) : "ok",
      s.last_success ? esc(new Date(s.last_success).toLocaleTimeString()) : "never", s.errors]);
    const nacks = d.nacks.map((n) => [esc(n.node), esc(new Date(n.at).toLocaleTimeString()), esc(n.type), esc(n.error)]);
    const problems = '<section id="problems">' + (d.problems.length
      ? '<ul class="problems">' + d.problems.map((p) => '<li class="' + esc(p.level) + '">' + esc(p.text) + "</li>").join("") + "</ul>"
      : '<p class="allwell">All services serving; discovery fresh; no NACKs.</p>') + "</section>";
    return problems + "<section><h1>Services</h1>" + (d.ready ? "" : '<p class="notice">waiting for the first discovery snapshot</p>') +
      table("services", ["service", "endpoints", "health", "healthy", "degraded", "draining", "unhealthy"], svcs) + "</section>" +
      '<section class="cols"><div><h2>Nodes</h2><p>' + d.nodes.connected + " connected (" + d.nodes.known + " known)</p>" +
      (d.nodes.connected ? table("", ["cluster", "nodes"], kv(d.nodes.by_cluster)) + table("", ["client", "nodes"], kv(d.nodes.by_client)) +
        table("", ["protocol", "streams"], kv(d.nodes.streams_by_protocol)) : "") + "</div>" +
      "<div><h2>Discovery</h2>" + table("", ["source", "state", "last success", "errors"], disc) +
      (dcs.length ? table("datacenters", ["datacenter", "state", "last success", "errors"], dcs) : "") +
      "<h2>Push latency</h2>" + histogram(d.push_latency) + "</div></section>" +
      "<section><h2>NACKs (" + d.nack_total + " in all)</h2>" + (nacks.length ? table("nacks", ["node", "at", "type", "error"], nacks) : '<p class="muted">none</p>') + "</section>";
  }

  // bars draws, per endpoint, its weight (of the largest) and its utilization.
  function bars(eps) {
    const maxW = Math.max(1, ...eps.map((e) => e.weight));
    const maxU = Math.max(1, ...eps.map((e) => e.utilization));
    const h = 120, gw = Math.max(18, Math.min(60, Math.floor(720 / Math.max(1, eps.length)))), bw = (gw - 6) / 2;
    const labels = gw >= 40; // room for an id under each pair of bars
    const g = eps.map((e, i) => {
      const x = i * gw, wh = (h * e.weight) / maxW, uh = (h * e.utilization) / maxU;
      const cls = e.health === "draining" ? " draining" : e.health === "unhealthy" ? " unhealthy" : "";
      return '<g class="endpoint" data-endpoint="' + esc(e.id) + '">' +
        '<rect class="weight' + cls + '" x="' + x + '" y="' + (h - wh).toFixed(1) + '" width="' + bw.toFixed(1) + '" height="' + wh.toFixed(1) + '"><title>' + esc(e.id) + " weight " + e.weight + "</title></rect>" +
        '<rect class="util" x="' + (x + bw).toFixed(1) + '" y="' + (h - uh).toFixed(1) + '" width="' + bw.toFixed(1) + '" height="' + uh.toFixed(1) + '"><title>' + esc(e.id) + " utilization " + fmt(e.utilization) + "</title></rect>" +
        (labels ? '<text class="tick" x="' + (x + bw).toFixed(1) + '" y="' + (h + 12) + '">' + esc(e.id.length > 9 ? "…" + e.id.slice(-8) : e.id) + "</text>" : "") + "</g>";
    }).join("");
    return '<svg id="bars" width="' + eps.length * gw + '" height="' + (h + (labels ? 16 : 0)) + '">' + '<line class="axis" x1="0" x2="' + eps.length * gw + '" y1="' + h + '" y2="' + h + '"/>' + g + "</svg>" +
      '<p class="legend"><span class="key weight"></span> weight (of ' + maxW + ') <span class="key util"></span> utilization (of ' + fmt(maxU) + ")</p>";
  }

  function heat(eps) {
    const maxC = Math.max(1, ...eps.map((e) => e.connections));
    const cw = Math.max(6, Math.min(40, Math.floor(720 / Math.max(1, eps.length))));
    const cells = eps.map((e, i) => {
      const level = Math.min(4, Math.round((4 * e.connections) / maxC));
      return '<rect class="heat h' + level + '" x="' + i * cw + '" y="0" width="' + (cw - 1) + '" height="18"><title>' + esc(e.id) + ": " + e.connections + " connections</title></rect>";
    }).join("");
    return '<svg id="heat" width="' + eps.length * cw + '" height="18">' + cells + "</svg>";
  }

  function spark(values, cls, lo, hi) {
    const w = 160, h = 28, n = values.length;
    if (!n) return "";
    const vs = values.filter((v) => v != null);
    const top = hi != null ? hi : Math.max(1e-9, ...vs), bottom = lo != null ? lo : 0;
    let d = "", pen = false;
    values.forEach((v, i) => {
      if (v == null) { pen = false; return; }
      const x = n === 1 ? w : (w * i) / (n - 1), y = h - 2 - ((h - 4) * (v - bottom)) / Math.max(1e-9, top - bottom);
      d += (pen ? "L" : "M") + x.toFixed(1) + " " + Math.min(h, Math.max(0, y)).toFixed(1);
      pen = true;
    });
    const last = values[n - 1];
    const dot = last == null ? "" : '<circle cx="' + (w - 2) + '" cy="' + Math.min(h - 2, Math.max(2, h - 2 - ((h - 4) * (last - bottom)) / Math.max(1e-9, top - bottom))).toFixed(1) + '" r="2"/>';
    return '<svg class="spark ' + cls + '" width="' + w + '" height="' + h + '"><path d="' + d + '"/>' + dot + "<title>latest " + fmt(last) + "</title></svg>";
  }

  function serviceView(d) {
    const s = d.subsets;
    const drainButton = (e) => e.drain.indexOf("admin") >= 0
      ? '<button class="undrain" data-service="' + esc(d.name) + '" data-endpoint="' + esc(e.id) + '">undrain</button>'
      : '<button class="drain" data-service="' + esc(d.name) + '" data-endpoint="' + esc(e.id) + '">drain</button>';
    const rows = d.endpoints.map((e) => [esc(e.id), esc(e.address), esc(e.datacenter || ""), '<span class="h-' + esc(e.health) + '">' + esc(e.health) + "</span>",
      esc(e.drain.join(", ")), e.weight + (e.weight_reason ? ' <span class="muted">' + esc(e.weight_reason) + "</span>" : ""),
      fmt(e.utilization), fmt(e.qps, 1), e.report_age_seconds == null ? "–" : fmt(e.report_age_seconds, 0) + "s", e.connections, drainButton(e)]);
    let out = "<section><h1>" + esc(d.name) + "</h1><p>" + d.counts.endpoints + " endpoints: " + d.counts.healthy + " healthy, " +
      d.counts.degraded + " degraded, " + d.counts.draining + " draining, " + d.counts.unhealthy + " unhealthy · utilization spread " +
      fmt(d.spread) + (d.predicted_spread ? " (predicted " + fmt(d.predicted_spread) + ")" : "") + "</p>" + flashHTML() +
      bars(d.endpoints) + table("endpoints", ["endpoint", "address", "datacenter", "health", "drain", "weight", "utilization", "qps", "report age", "connections", ""], rows) + "</section>";
    out += policyView(d.policy);
    if (s) {
      out += "<section><h2>Subsets</h2><p>" + (s.subsetting ? esc(s.algorithm) + ", " + s.subset_size + " per node" : "every node gets every endpoint") +
        " · connections per endpoint min " + s.balance.min + ", mean " + fmt(s.balance.mean, 1) + ", max " + s.balance.max +
        " · balance (max/mean) " + fmt(s.balance.max_over_mean) + "</p>" + heat(d.endpoints) + "</section>";
    }
    return out;
  }

  // policyView is the service's traffic policy from Consul's config entries, in brief.
  function policyView(p) {
    if (!p) return "";
    const rej = p.rejected.map((r) => [esc(r.kind), esc(r.field), esc(r.reason), esc(r.detail)]);
    const subs = p.subsets.map((x) => [esc(x.name) + (x.name === p.default_subset ? ' <span class="muted">default</span>' : ""), esc(x.filter || "every instance"), x.only_passing ? "passing only" : ""]);
    const splits = p.splits.map((x) => [fmt(x.weight, 1) + "%", esc(x.service || "(this service)"), esc(x.subset || "")]);
    return '<section id="policy"><h2>Traffic policy</h2><p>' + (p.entries.length ? "from " + esc(p.entries.join(", ")) : "Consul's defaults (no config entries)") +
      (p.protocol ? " · protocol " + esc(p.protocol) : "") + (p.redirect ? " · redirect to " + esc(p.redirect) : "") + " · " + p.routes + " routes</p>" +
      (subs.length ? table("policy-subsets", ["subset", "filter", ""], subs) : "") +
      (splits.length ? table("policy-splits", ["weight", "service", "subset"], splits) : "") +
      (rej.length ? '<p class="bad">rejected (the last good version stays in use):</p>' + table("policy-rejected", ["kind", "field", "reason", "detail"], rej) : "") + "</section>";
  }

  function nodeSelect(s) {
    if (!s || !s.nodes.length) return "";
    const opts = ['<option value="">choose a node</option>'].concat(s.nodes.map((n) => "<option" + (n === chosenNode ? " selected" : "") + ">" + esc(n) + "</option>"));
    const more = s.known_nodes > s.nodes.length ? ' <span class="muted">(the first ' + s.nodes.length + " of " + s.known_nodes + " nodes by id)</span>" : "";
    return '<section class="nodesel"><label>subset and replacements of node <select id="node">' + opts.join("") + "</select></label>" + more + "</section>";
  }

  function nodeView(s) {
    if (!s || (!s.node && !s.levels)) return "";
    let out = "<section>";
    if (s.node) out += "<h2>Node " + esc(s.node.id) + " (" + esc(s.node.group) + " #" + s.node.index + ")</h2>" + table("node-subset", ["subset", "replacements", "in its EDS"], [[esc(s.node.subset.join(", ")), esc(s.node.replacements.join(", ")), esc(s.node.endpoints.join(", "))]]);
    if (s.levels) out += levelsView(s.levels);
    return out + "</section>";
  }

  function levelsView(l) {
    const p = l.place;
    const rows = [];
    l.levels.forEach((lv) => lv.localities.forEach((loc) => rows.push([String(lv.priority), esc([loc.region, loc.zone, loc.sub_zone].filter((x) => x).join("/") || "–"), String(loc.weight), String(loc.endpoints), String(loc.serving)])));
    return "<h3>Priority levels</h3><p>place: datacenter " + esc(p.datacenter || "–") + ", region " + esc(p.region || "–") + ", zone " + esc(p.zone || "–") + "</p>" +
      table("node-levels", ["priority", "locality", "weight", "endpoints", "serving"], rows);
  }

  function historyHTML() {
    const h = history;
    if (!h || !h.times.length) return '<section><h2>History</h2><p class="muted">no samples yet (one every ' + (h ? h.interval_seconds : 10) + " s)</p></section>";
    const secs = h.times[h.times.length - 1] - h.times[0];
    const span = h.times.length < 2 ? "one sample" : secs < 120 ? "last " + secs + " s" : "last " + Math.round(secs / 60) + " min";
    const rows = h.endpoints.map((e) => [esc(e.id), spark(e.weight, "weight"), spark(e.utilization, "util", 0, 1)]);
    return '<section id="history"><h2>History (' + span + ", every " + h.interval_seconds + " s)</h2><p>spread " + spark(h.spread, "spread", 1) + "</p>" +
      table("history-table", ["endpoint", "weight", "utilization (0–1)"], rows) + "</section>";
  }

  function drains(d) {
    const admin = d.drains.map((a) => [esc(a.service), esc(a.endpoint), esc(a.node), esc(new Date(a.since).toLocaleString()),
      a.until ? esc(new Date(a.until).toLocaleString()) : "until deleted",
      '<button class="undrain" data-service="' + esc(a.service || "") + '" data-endpoint="' + esc(a.endpoint || "") + '" data-node="' + esc(a.node || "") + '">undrain</button>']);
    const draining = d.draining.map((x) => [esc(x.service), esc(x.endpoint), esc(x.node), esc(x.sources.join(", "))]);
    return "<section>" + flashHTML() +
      "<h2>Admin drains</h2>" + (admin.length ? table("admin-drains", ["service", "endpoint", "node", "since", "until", ""], admin) : '<p class="muted">none</p>') +
      "<h2>Draining endpoints</h2>" + (draining.length ? table("draining", ["service", "endpoint", "node", "sources"], draining) : '<p class="muted">none</p>') + "</section>";
  }

  function drainForm() {
    return '<section><h1>Drains</h1><form id="drain-form" class="drainform"><input name="service" placeholder="service"><input name="endpoint" placeholder="endpoint (empty: whole service)">' +
      '<input name="node" placeholder="or a Consul node"><input name="ttl" placeholder="ttl, e.g. 10m (empty: until undrained)"><button type="submit">drain</button></form></section>';
  }

  function rateLimits(d) {
    if (!d.domains.length) return '<section><h1>Rate limits</h1><p class="notice">no rate-limit domains configured (ratelimit.config)</p></section>';
    return "<section><h1>Rate limits</h1>" + d.domains.map((x) => {
      const near = x.nearest.map((k) => [esc(k.key) + (k.truncated ? "…" : ""), k.used + " / " + k.limit, '<svg class="meter" width="120" height="10"><rect class="track" width="120" height="10"/><rect class="' +
        (k.ratio >= 1 ? "over" : "fill") + '" width="' + (120 * Math.min(1, k.ratio)).toFixed(1) + '" height="10"/></svg>', fmt(k.age_seconds, 0) + "s"]);
      const classes = x.criticality.map((c) => [esc(c.class), c.admitted, c.refused, pct(c.acceptance)]);
      return '<div class="domain"><h2>' + esc(x.domain) + "</h2><p><b>" + fmt(x.decisions_per_second, 1) + "</b> decisions/s · <b>" + pct(x.over_limit_share) +
        "</b> over the limit (last 10 s) · " + x.decisions + " decided, " + x.over_limit + " over since start</p>" +
        table("", ["rule", "name", "limit"], x.rules.map((r) => [esc(r.key), esc(r.name), esc(r.limit) + (r.shadow_mode ? " (shadow)" : "")])) +
        "<h3>Keys nearest their limit</h3>" + (near.length ? table("", ["key", "used", "", "seen"], near) : '<p class="muted">none decided yet</p>') +
        "<h3>Criticality</h3>" + table("", ["class", "admitted hits", "refused hits", "acceptance"], classes) + "</div>";
    }).join("") + "</section>";
  }

  function flashHTML() {
    if (!flash) return "";
    return '<p id="drain-result" class="' + (flash.ok ? "ok" : "error") + '">' + esc(flash.text) + "</p>";
  }

  // drainCall calls the drain API with the same validation and errors as curl.
  async function drainCall(method, target) {
    const b = {};
    for (const k of ["service", "endpoint", "node", "ttl"]) if (target[k]) b[k] = target[k];
    try {
      const resp = await fetch("/v1/drain", { method, headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(b) });
      const text = await resp.text();
      let msg = text;
      try { const j = JSON.parse(text); msg = j.error ? j.error : method === "POST" ? "drained " + JSON.stringify(b) : "undrained " + JSON.stringify(b); } catch (e) { /* not JSON */ }
      flash = { ok: resp.ok, text: resp.ok ? msg : resp.status + ": " + msg };
    } catch (e) {
      flash = { ok: false, text: e.message };
    }
    poll(true);
  }

  main.addEventListener("click", (ev) => {
    const t = ev.target;
    if (t.tagName !== "BUTTON" || !(t.classList.contains("drain") || t.classList.contains("undrain"))) return;
    ev.preventDefault();
    drainCall(t.classList.contains("drain") ? "POST" : "DELETE", { service: t.dataset.service, endpoint: t.dataset.endpoint, node: t.dataset.node });
  });
  main.addEventListener("submit", (ev) => {
    if (ev.target.id !== "drain-form") return;
    ev.preventDefault();
    const f = new FormData(ev.target);
    drainCall("POST", { service: f.get("service").trim(), endpoint: f.get("endpoint").trim(), node: f.get("node").trim(), ttl: f.get("ttl").trim() });
  });
  main.addEventListener("change", (ev) => {
    if (ev.target.id === "node") { chosenNode = ev.target.value; poll(true); }
  });
  document.addEventListener("visibilitychange", () => { if (!document.hidden) poll(true); });
  poll(true);
})();
