"use strict";
// The page's only script: it filters and sorts the peers, draws a passing
// peer's chart and table when its row opens (from its data-d, the same
// numbers svg.go and peer.go draw a failing peer from), draws the compact
// list of a large report's passing peers a page at a time (from cdata, a
// line a peer), and shows the attempts-per-second chart's counts under
// the pointer.
(function () {
  var list = document.getElementById("plist");
  var peers = Array.prototype.slice.call(list.children);

  // The compact list: [position, address, attempts, retransmits, max
  // |jitter|, strict first failing interval] a peer, shown by the filter
  // (cshown, in the sort's order), cpage of them drawn.
  var cdata = document.getElementById("cdata"), comp = [], cshown = [], cpage = 0, CPAGE = 200;
  var clist = document.getElementById("clist"), cmore = document.getElementById("c-more"), ccount = document.getElementById("c-count");
  if (cdata) {
    cdata.textContent.split("\n").forEach(function (l) {
      if (!l) return;
      var f = l.split("\t");
      comp.push([+f[0], f[1], +f[2], +f[3], +f[4], +f[5]]);
    });
    cshown = comp.slice();
  }
  function cline(c) {
    var s = '<tr id="p-' + c[0] + '" class="pass"><td class="mark">✓</td><td class="addr">' + esc(c[1]) + "</td><td>" + c[2] +
      "</td><td>" + c[3] + "</td><td>" + (c[5] ? "failed at interval " + c[5] : "passed") + "</td><td>" + c[4].toFixed(2) + " %</td></tr>";
    return s;
  }
  function cdraw(upTo) {
    if (!clist) return;
    cpage = Math.min(Math.max(upTo, CPAGE), cshown.length);
    var s = "";
    for (var i = 0; i < cpage; i++) s += cline(cshown[i]);
    clist.innerHTML = s;
    cmore.hidden = cpage >= cshown.length;
    ccount.textContent = cpage + " of " + cshown.length + " drawn";
  }

  // Filter and sort.
  var fAddr = document.getElementById("f-addr");
  var fVerdict = document.getElementById("f-verdict");
  var fSort = document.getElementById("f-sort");
  var fCount = document.getElementById("f-count");
  var total = peers.length + comp.length;
  function apply() {
    var q = fAddr.value.trim().toLowerCase(), v = fVerdict.value, shown = 0;
    for (var i = 0; i < peers.length; i++) {
      var p = peers[i], pv = p.dataset.v;
      var ok = (!q || p.dataset.a.toLowerCase().indexOf(q) >= 0) &&
        (!v || pv === v || (v === "notpass" && pv !== "pass"));
      p.classList.toggle("hidden", !ok);
      if (ok) shown++;
    }
    if (comp.length) {
      // Every line of the compact list passed.
      var all = !v || v === "pass";
      cshown = all ? comp.filter(function (c) { return !q || c[1].toLowerCase().indexOf(q) >= 0; }) : [];
      csort();
      shown += cshown.length;
    }
    fCount.textContent = shown + " of " + total + " peers shown";
  }
  // csort orders the compact list as the sort asks: the report's order
  // is the address's among passing peers.
  function csort() {
    var key = fSort.value, col = key === "n" ? 2 : key === "j" ? 4 : 0;
    cshown.sort(function (a, b) { return (col ? b[col] - a[col] : 0) || a[0] - b[0]; });
    cdraw(CPAGE);
  }
  function sort() {
    var key = fSort.value, desc = key === "n" || key === "j";
    var sorted = peers.slice().sort(function (a, b) {
      var d = parseFloat(a.dataset[key]) - parseFloat(b.dataset[key]);
      if (desc) d = -d;
      return d || a.dataset.o - b.dataset.o;
    });
    var frag = document.createDocumentFragment();
    sorted.forEach(function (p) { frag.appendChild(p); });
    list.appendChild(frag);
    if (comp.length) csort();
  }
  fAddr.addEventListener("input", apply);
  fVerdict.addEventListener("change", apply);
  fSort.addEventListener("change", sort);
  if (cmore) cmore.addEventListener("click", function () { cdraw(cpage + CPAGE * 5); });
  // A form restored by the browser (back, reload) filters at once;
  // otherwise every peer shows, and none needs touching.
  if (fAddr.value || fVerdict.value) apply();
  else {
    fCount.textContent = total + " of " + total + " peers shown";
    cdraw(CPAGE);
  }
  if (fSort.value !== "o") sort();

  // A row's chart and table, drawn when it first opens.
  list.addEventListener("toggle", function (e) {
    var d = e.target;
    if (d.tagName === "DETAILS" && d.open && !d.dataset.drawn) draw(d);
  }, true);

  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;" }[c];
    });
  }
  function num(v) { return String(Math.round(v * 10) / 10); }
  function fmtMS(v) {
    if (v >= 1000) return +(v / 1000).toPrecision(4) + " s";
    if (v >= 1) return +v.toPrecision(4) + " ms";
    return +v.toPrecision(3) + " ms";
  }
  var OUT = ["ok", "early", "late"], TERM = ["", "backoff", "connect timeout", "reset"];
  // The constants of svg.go.
  var LEFT = 56, TOP = 22, PH = 140, BOTTOM = 18, PW = 660, MINCOL = 8, MAXCOL = 56, RIGHT = 200, WORDS = 9;

  function words(iv) {
    var b = Math.floor(iv[0]);
    return iv[4] === 1 ? "early: " + b + " ms < " + Math.round(iv[2]) + " ms" : "late: " + b + " ms > " + Math.round(iv[3]) + " ms";
  }

  function chart(d) {
    var ivs = d.i, n = ivs.length;
    var cw = Math.max(MINCOL, Math.min(MAXCOL, PW / Math.max(n, 1)));
    var pw = n * cw, w = LEFT + pw + RIGHT, h = TOP + PH + BOTTOM;
    var lo = Infinity, hi = -Infinity;
    ivs.forEach(function (iv) {
      [iv[0], iv[2], iv[3]].forEach(function (v) { if (v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); } });
    });
    if (!isFinite(lo)) { lo = 1; hi = 1000; }
    lo = Math.log10(Math.max(lo, 0.01) / 1.25); hi = Math.log10(Math.max(hi, 0.01) * 1.25);
    function y(v) {
      var l = Math.min(Math.log10(Math.max(v, Math.pow(10, lo))), hi);
      return TOP + PH - (l - lo) / (hi - lo) * PH;
    }
    var s = '<svg class="chart" role="img" viewBox="0 0 ' + num(w) + " " + num(h) + '" width="' + num(w) + '" height="' + num(h) + '">';
    var a = d.a;
    var span = a.length > 1 ? a[a.length - 1][0] : 0;
    if (span > 0) {
      s += '<path class="tl" d="M' + LEFT + " 8H" + num(LEFT + pw);
      a.forEach(function (t) { s += "M" + num(LEFT + t[0] / span * pw) + " 3v10"; });
      s += '"/><text class="lab" x="2" y="12">attempts</text>';
    }
    var steps = hi - lo < 2 ? [1, 2, 5] : [1];
    for (var dec = Math.floor(lo); dec <= hi; dec++) {
      steps.forEach(function (m) {
        var v = m * Math.pow(10, dec), l = Math.log10(v);
        if (l < lo || l > hi) return;
        s += '<path class="grid" d="M' + LEFT + " " + num(y(v)) + "H" + num(LEFT + pw) + '"/><text class="lab" x="' +
          (LEFT - 4) + '" y="' + num(y(v) + 3) + '" text-anchor="end">' + fmtMS(v) + "</text>";
      });
    }
    var every = Math.ceil(24 / cw), worded = 0;
    ivs.forEach(function (iv, i) {
      var k = i + 1, x = LEFT + (i + 0.5) * cw, bw = Math.max(cw * 0.6, 4), ok = iv[4] === 0, reset = iv[5] === 3;
      var title = "interval " + k + ": " + iv[0].toFixed(3) + " ms" + (reset ? ", after a connection that succeeded: not judged" :
        ", window " + Math.round(iv[2]) + "–" + Math.round(iv[3]) + " ms: " + (ok ? "✓ ok" : "✗ " + words(iv)));
      s += '<g class="iv' + (ok ? "" : " bad") + '"><title>' + esc(title) + "</title>";
      if (!reset) {
        s += '<rect class="band" x="' + num(x - bw / 2) + '" y="' + num(y(iv[3])) + '" width="' + num(bw) + '" height="' +
          num(Math.max(y(iv[2]) - y(iv[3]), 1)) + '"/><path class="exp" d="M' + num(x - bw / 2) + " " + num(y(iv[1])) + "h" + num(bw) + '"/>';
      }
      var py = y(iv[0]);
      if (reset) s += '<path class="pt reset" d="M' + num(x) + " " + num(py - 4) + 'l4 4-4 4-4-4z"/>';
      else if (ok) s += '<circle class="pt" cx="' + num(x) + '" cy="' + num(py) + '" r="3.5"/>';
      else {
        s += '<path class="pt x" d="M' + num(x - 4) + " " + num(py - 4) + 'l8 8m0-8-8 8"/>';
        if (worded <= WORDS) {
          s += '<text class="why" x="' + num(LEFT + pw + 10) + '" y="' + num(TOP + 10 + 13 * worded) + '">' +
            (worded < WORDS ? "✗ " + k + ": " + esc(words(iv)) : "… and more, in the table") + "</text>";
        }
        worded++;
      }
      if (i % every === 0 || k === n) s += '<text class="lab" x="' + num(x) + '" y="' + num(h - 5) + '" text-anchor="middle">' + k + "</text>";
      s += "</g>";
    });
    return s + "</svg>";
  }

  function table(d, id) {
    var fates = d.a.some(function (t) { return t.length > 3; });
    var t0 = new Date(d.t0.slice(0, 23) + "Z"), ns0 = parseInt(d.t0.slice(20, 29), 10);
    var s = '<table class="att"><thead><tr><th>#</th><th>time (UTC)</th><th>port</th><th>retr.</th>' + (fates ? "<th>fate</th>" : "") +
      "<th>interval</th><th>ms</th><th>expected ms</th><th>window ms</th><th>jitter</th><th>verdict</th></tr></thead><tbody>";
    d.a.forEach(function (a, j) {
      var iv = j > 0 ? d.i[j - 1] : null;
      // The time of day to the ns: the first attempt's, plus the offset.
      var ns = ns0 + Math.round(a[0] * 1e6), sec = Math.floor(ns / 1e9);
      var tm = new Date(t0.getTime() - t0.getUTCMilliseconds() + sec * 1000).toISOString().slice(11, 19) + "." +
        String(ns - sec * 1e9).padStart(9, "0");
      s += "<tr" + (iv ? ' id="' + id + "-i" + j + '"' + (iv[4] ? ' class="bad"' : "") : "") + "><td>" + (j + 1) + "</td><td>" + tm +
        "</td><td>" + a[1] + "</td><td>" + a[2] + "</td>" + (fates ? "<td>" + esc(a[3] || "") + "</td>" : "");
      if (!iv) s += '<td colspan="6" class="note">' + (j === 0 ? "first attempt, " + esc(d.t0) : "") + "</td>";
      else if (iv[5] === 3) s += "<td>" + j + "</td><td>" + iv[0].toFixed(3) + '</td><td colspan="3"></td><td class="vd">○ reset: after a connection that succeeded, not judged</td>';
      else {
        var jit = (iv[0] - iv[1]) * 100 / iv[1], okv = iv[4] === 0;
        s += "<td>" + j + "</td><td>" + iv[0].toFixed(3) + "</td><td>" + iv[1].toFixed(1) + "</td><td>" + iv[2].toFixed(1) + "–" + iv[3].toFixed(1) +
          "</td><td>" + (jit >= 0 ? "+" : "") + jit.toFixed(2) + ' %</td><td class="vd">' +
          (okv ? "✓ ok" : '<span class="reason">✗ ' + esc(words(iv)) + "</span>") +
          (iv[5] ? " (set by the " + TERM[iv[5]] + ")" : "") +
          (okv && !iv[6] ? ", strict: fails" : "") + (!okv && iv[6] ? ", strict: ok" : "") + "</td>";
      }
      s += "</tr>";
    });
    s += "</tbody></table>";
    if (d.more) s += '<p class="more">… ' + d.more + " more attempts, in the JSON report</p>";
    return s;
  }

  function draw(el) {
    var d = JSON.parse(el.dataset.d), s = "";
    if (d.x) s += '<ul class="notes">' + d.x.map(function (n) { return "<li>" + esc(n) + "</li>"; }).join("") + "</ul>";
    if (d.i.length) s += chart(d);
    el.insertAdjacentHTML("beforeend", '<div class="drawn">' + s + table(d, el.id) + "</div>");
    el.dataset.drawn = "1";
  }

  // A link to a row, or into one, opens it; a link to a line of the
  // compact list draws the list down to it, shown whatever the filter.
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1)), el = id && document.getElementById(id);
    var cm = !el && comp.length && /^p-(\d+)$/.exec(id);
    if (cm) {
      var at = cshown.findIndex(function (c) { return c[0] === +cm[1]; });
      if (at < 0 && comp.some(function (c) { return c[0] === +cm[1]; })) {
        fAddr.value = "";
        fVerdict.value = "";
        apply();
        at = cshown.findIndex(function (c) { return c[0] === +cm[1]; });
      }
      if (at >= 0) {
        cdraw(at + 1);
        el = document.getElementById(id);
      }
    }
    var m = !el && /^(p-\d+)-i\d+$/.exec(id), row = el || m && document.getElementById(m[1]);
    if (row && row.tagName === "DETAILS") {
      // Drawn now, not on the toggle event, so that the scroll lands on it.
      if (!row.dataset.drawn) draw(row);
      row.open = true;
      el = document.getElementById(id);
    }
    if (el) el.scrollIntoView();
  }
  window.addEventListener("hashchange", openTarget);
  if (location.hash) openTarget();

  // The attempts-per-second chart's tooltip.
  var rate = document.getElementById("rate"), tip = document.getElementById("tip");
  if (rate) {
    var counts = rate.dataset.c.split(",").map(Number), bucket = +rate.dataset.bucket;
    rate.addEventListener("mousemove", function (e) {
      var r = rate.getBoundingClientRect(), x = (e.clientX - r.left) * 800 / r.width;
      var i = Math.floor((x - 56) / 720 * counts.length);
      if (i < 0 || i >= counts.length) { tip.hidden = true; return; }
      tip.textContent = "+" + fmtMS(i * bucket) + ": " + counts[i] + " attempts" + (bucket > 1000 ? " (" + (counts[i] * 1000 / bucket).toFixed(1) + "/s)" : "");
      tip.style.left = e.clientX + 12 + "px";
      tip.style.top = e.clientY + 12 + "px";
      tip.hidden = false;
    });
    rate.addEventListener("mouseleave", function () { tip.hidden = true; });
  }
})();
