// Neighbourhood graph (vis-network, vendored): edges coloured by kind; click a node to open it.
(function () {
  "use strict";
  var network = null;

  function load() {
    var el = document.getElementById("graph");
    var depth = document.getElementById("graph-depth").value;
    fetch(el.dataset.url + "?depth=" + depth, { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (data) {
        var nodes = data.nodes.map(function (n) {
          return { id: n.id, label: "#" + n.id + " " + n.label, title: n.title, group: n.kind,
                   borderWidth: n.id === data.center ? 4 : 1, shape: n.kind === "leaf" ? "dot" : "diamond",
                   size: n.id === data.center ? 18 : 10 };
        });
        var edges = data.edges.map(function (e) {
          return { id: e.id, from: e.from, to: e.to, color: { color: e.color }, arrows: "to",
                   title: e.kind + " (" + e.weight + ")", width: 1 + 3 * e.weight };
        });
        document.getElementById("graph-stats").textContent =
          window.nylonT("graph_stats", { nodes: nodes.length, edges: edges.length });
        el.dataset.nodes = String(nodes.length);
        el.dataset.edges = String(edges.length);
        var opts = { physics: { stabilization: { iterations: 150 } }, interaction: { hover: true },
                     nodes: { font: { size: 11 } } };
        if (network) { network.destroy(); }
        network = new vis.Network(el, { nodes: new vis.DataSet(nodes), edges: new vis.DataSet(edges) }, opts);
        network.on("doubleClick", function (p) {
          if (p.nodes.length) { location.href = el.dataset.nodeBase + p.nodes[0] + "/graph/"; }
        });
        network.on("click", function (p) {
          if (p.nodes.length && window.htmx) {
            window.htmx.ajax("GET", el.dataset.nodeBase + p.nodes[0] + "/", { target: "#drawer" });
          }
        });
        network.once("stabilizationIterationsDone", function () { el.dataset.ready = "1"; });
        setTimeout(function () { el.dataset.ready = "1"; }, 3000);
      });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.getElementById("graph-depth").addEventListener("change", load);
    load();
  });
})();
