"use strict";
// Berth's status page: /status.json every REFRESH_MS, drawn without reloading the page.
// Everything that comes from the scheduler is set as text, never as markup.

const REFRESH_MS = 5000;
const STATES = ["up", "down", "disabled"];
let last = null;         // the last status read
let lastReadAt = null;   // when (Date)
let layouts = [];        // per zone: {canvas, rows, cell, columns}

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (key === "class") node.className = value; else node.setAttribute(key, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clock(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString();
}

function percent(used, total) {
  return total > 0 ? Math.round((100 * used) / total) + "%" : "-";
}

// Each resource: its used and total columns, and its name in hosts.ratios. A host can take
// total x allocation ratio, as the filters see it (the agent counts what it reserves as used).
const RESOURCES = {ram: ["ram_used_mb", "ram_mb"], vcpus: ["vcpus_used", "vcpus"], disk: ["disk_used_gb", "disk_gb"]};

function ratioOf(hosts, resource) {
  return (hosts.ratios && hosts.ratios[resource]) || 1;
}

function filled(hosts, i, resource) {  // the share of what the host can take that is used
  const [used, total] = RESOURCES[resource];
  const capacity = hosts[total][i] * ratioOf(hosts, resource);
  return capacity > 0 ? hosts[used][i] / capacity : 0;
}

function ofRatio(hosts, i, resource) {  // "28% of 4.0x": the share of total x ratio used
  const [used, total] = RESOURCES[resource];
  const ratio = ratioOf(hosts, resource);
  return `${percent(hosts[used][i], hosts[total][i] * ratio)} of ${ratio.toFixed(1)}x`;
}

function fill(hosts, i, resource) {  // "28% of 4.0x (113% physical)", or "50%" at a ratio of 1.0
  const [used, total] = RESOURCES[resource];
  const physical = percent(hosts[used][i], hosts[total][i]);
  return ratioOf(hosts, resource) === 1 ? physical : `${ofRatio(hosts, i, resource)} (${physical} physical)`;
}

function share(hosts, i, measure) {
  const value = measure in RESOURCES ? filled(hosts, i, measure)
    : Math.max(filled(hosts, i, "ram"), filled(hosts, i, "vcpus"), filled(hosts, i, "disk"));
  return Math.min(1, Math.max(0, value));
}

function shares(hosts, measure) {  // share() of every host, once per drawing
  const values = new Float64Array(hosts.names.length);
  for (let i = 0; i < values.length; i++) values[i] = share(hosts, i, measure);
  return values;
}

function rgb(value) {  // green, yellow at half, red when full
  const [a, b, t] = value < 0.5 ? [[46, 160, 67], [235, 190, 40], value * 2]
    : [[235, 190, 40], [215, 48, 39], (value - 0.5) * 2];
  return a.map((x, k) => Math.round(x + (b[k] - x) * t));
}

const LEVELS = 200;  // the heat map's colours: a share is drawn to the nearest 1/LEVELS
const DOWN_RGB = [0x3a, 0x3f, 0x45];
const DISABLED_RGB = [0x8f, 0xa3, 0xb8];

function replaceRows(table, rows, emptyText, columns) {
  const body = table.tBodies[0];
  body.replaceChildren();
  if (!rows.length) {
    body.append(el("tr", {}, el("td", {class: "empty", colspan: String(columns)}, emptyText)));
    return;
  }
  for (const cells of rows) {
    body.append(el("tr", {}, ...cells.map((cell) => cell instanceof Node ? el("td", {}, cell) : el("td", {}, cell))));
  }
}

function renderSummary(data) {
  const hosts = data.hosts;
  const counts = [0, 0, 0];
  let ram = [0, 0], vcpus = [0, 0], disk = [0, 0];
  for (let i = 0; i < hosts.names.length; i++) {
    counts[hosts.state[i]]++;
    if (hosts.state[i] !== 0) continue;
    ram = [ram[0] + hosts.ram_used_mb[i], ram[1] + hosts.ram_mb[i]];
    vcpus = [vcpus[0] + hosts.vcpus_used[i], vcpus[1] + hosts.vcpus[i]];
    disk = [disk[0] + hosts.disk_used_gb[i], disk[1] + hosts.disk_gb[i]];
  }
  const instances = data.instances
    ? Object.entries(data.instances).filter(([state]) => state !== "DELETED").reduce((a, [, n]) => a + n, 0) : "?";
  const figure = (value, label, id) => el("div", {class: "figure", id}, el("strong", {}, value), el("span", {}, label));
  const taken = ([used, total], resource, label) => {  // against what the hosts can take, physical apart
    const ratio = ratioOf(hosts, resource);
    return ratio === 1 ? [percent(used, total), label]
      : [percent(used, total * ratio), `${label} at ${ratio.toFixed(1)}x (${percent(used, total)} physical)`];
  };
  document.getElementById("summary").replaceChildren(
    figure(counts[0], "hosts up", "hosts-up"), figure(counts[1], "down", "hosts-down"),
    figure(counts[2], "disabled", "hosts-disabled"),
    figure(...taken(ram, "ram", "of the RAM of the hosts up used"), "ram-used"),
    figure(...taken(vcpus, "vcpus", "of their vCPUs"), "vcpus-used"),
    figure(...taken(disk, "disk", "of their disk"), "disk-used"),
    figure(instances, "instances (not deleted)", "instances-total"));
}

const NO_AGGREGATE = "(in no aggregate)";

function groupsOf(hosts) {  // [[name, host indexes]], by name: zones, or aggregates (a host in each of its own)
  const groups = new Map();
  const add = (name, i) => { if (!groups.has(name)) groups.set(name, []); groups.get(name).push(i); };
  if (document.getElementById("grouping").value === "aggregate") {
    hosts.membership.forEach((m, i) => {
      const names = hosts.memberships[m];
      if (names.length) names.forEach((n) => add(n, i)); else add(NO_AGGREGATE, i);
    });
  } else {
    hosts.zone.forEach((z, i) => add(hosts.zones[z], i));
  }
  return [...groups.entries()].sort((a, b) => a[0].localeCompare(b[0]));
}

function palette() {  // [level or LEVELS + 1 (down), LEVELS + 2 (disabled)] -> a pixel of ImageData (RGBA)
  const pixels = new Uint32Array(LEVELS + 3);
  const bytes = new Uint8Array(pixels.buffer);
  const set = (k, [r, g, b]) => { bytes.set([r, g, b, 255], 4 * k); };
  for (let k = 0; k <= LEVELS; k++) set(k, rgb(k / LEVELS));
  set(LEVELS + 1, DOWN_RGB);
  set(LEVELS + 2, DISABLED_RGB);
  return pixels;
}

function drawCells(context, rows, hosts, values, cell, columns) {
  // Pixel by pixel into one image: a fillRect per host takes seconds at 100,000 hosts.
  const width = context.canvas.width, height = context.canvas.height;
  if (!width || !height) return;
  const image = context.createImageData(width, height);
  const pixels = new Uint32Array(image.data.buffer);
  const colours = palette();
  const side = cell - 1;
  for (let k = 0; k < rows.length; k++) {
    const i = rows[k], state = hosts.state[i];
    const code = state === 1 ? LEVELS + 1 : state === 2 ? LEVELS + 2 : Math.round(values[i] * LEVELS);
    const colour = colours[code];
    let at = Math.floor(k / columns) * cell * width + (k % columns) * cell;
    for (let y = 0; y < side; y++, at += width) pixels.fill(colour, at, at + side);
  }
  context.putImageData(image, 0, 0);
}

const LABEL_PX = 14;       // the least height of a row's label
const LABELS_WIDTH = 180;  // the labels' column, left of the cells

function rowLabels(hosts, rows, cell, columns) {
  // Each row of cells by the first and last of its hosts (they come in the order of their
  // names); rows too thin for a label of their own: one in so many, and a note says so.
  const lines = Math.ceil(rows.length / columns);
  const every = Math.ceil(LABEL_PX / cell);
  const labels = el("div", {class: "labels"});
  labels.style.height = `${lines * cell}px`;
  for (let line = 0; line < lines; line += every) {
    const first = rows[line * columns], last = rows[Math.min(rows.length, (line + 1) * columns) - 1];
    const text = first === last ? hosts.names[first] : `${hosts.names[first]} – ${hosts.names[last]}`;
    const label = el("span", {class: "label", title: text}, text);
    label.style.top = `${line * cell}px`;
    label.style.lineHeight = `${Math.max(cell, LABEL_PX)}px`;
    labels.append(label);
  }
  const said = every > 1 ? `1 row of hosts in ${every} labelled (${lines} rows of ${columns})`
    : rows.length > 2 && columns > 2 ? "each row labelled by its first and last host" : null;
  return [labels, said && el("p", {class: "note"}, `${said}: point at a host for its name`)];
}

function renderHeatmap(hosts, values) {
  const container = document.getElementById("heatmap");
  const width = Math.max(200, (container.clientWidth || 800) - LABELS_WIDTH);
  const parts = [];
  layouts = [];
  for (const [groupName, rows] of groupsOf(hosts)) {  // the hosts come in the order of their names
    const cell = rows.length > 2000 ? 6 : rows.length > 400 ? 10 : 18;
    const columns = Math.max(1, Math.floor(width / cell));
    const canvas = el("canvas", {width: String(columns * cell), height: String(Math.ceil(rows.length / columns) * cell),
                                 role: "img"});
    const context = canvas.getContext("2d");
    drawCells(context, rows, hosts, values, cell, columns);
    let down = 0, disabled = 0;
    rows.forEach((i, k) => {
      const state = hosts.state[i];
      if (state === 2) disabled++;
      if (state !== 1) return;
      down++;
      if (cell < 10) return;
      const x = (k % columns) * cell, y = Math.floor(k / columns) * cell;  // a cross on a host that is down
      context.strokeStyle = "#fff";
      context.beginPath();
      context.moveTo(x + 2, y + 2); context.lineTo(x + cell - 3, y + cell - 3);
      context.moveTo(x + cell - 3, y + 2); context.lineTo(x + 2, y + cell - 3);
      context.stroke();
    });
    canvas.setAttribute("aria-label", `${rows.length} hosts of ${groupName}`);
    const title = `${groupName}: ${rows.length} host${rows.length === 1 ? "" : "s"}` +
      (down ? `, ${down} down` : "") + (disabled ? `, ${disabled} disabled` : "");
    const [labels, note] = rowLabels(hosts, rows, cell, columns);
    const part = el("div", {class: "zone", "data-group": groupName, "data-hosts": String(rows.length)},
                    el("h3", {}, title), el("div", {class: "map"}, labels, canvas));
    if (note) part.append(note);
    layouts.push({canvas, rows, cell, columns});
    canvas.addEventListener("mousemove", (event) => showHost(event, layouts.find((l) => l.canvas === canvas)));
    parts.push(part);
  }
  container.replaceChildren(...parts);
}

function describeHost(hosts, i) {
  const names = hosts.memberships[hosts.membership[i]];
  const aggregates = names.length ? `; aggregates ${names.join(", ")}` : "";
  const over = (resource) => ratioOf(hosts, resource) === 1 ? "" : ` (${ofRatio(hosts, i, resource)})`;
  return `${hosts.names[i]} (${hosts.zones[hosts.zone[i]]}, ${STATES[hosts.state[i]]}): ` +
    `RAM ${hosts.ram_used_mb[i]} of ${hosts.ram_mb[i]} MB${over("ram")}, ` +
    `vCPUs ${hosts.vcpus_used[i]} of ${hosts.vcpus[i]}${over("vcpus")}, ` +
    `disk ${hosts.disk_used_gb[i]} of ${hosts.disk_gb[i]} GB${over("disk")}${aggregates}`;
}

function showHost(event, layout) {
  if (!layout || !last) return;
  const box = layout.canvas.getBoundingClientRect();
  const k = Math.floor((event.clientY - box.top) / layout.cell) * layout.columns +
    Math.floor((event.clientX - box.left) / layout.cell);
  if (k >= 0 && k < layout.rows.length) {
    document.getElementById("hover").textContent = describeHost(last.hosts, layout.rows[k]);
  }
}

function fullest(hosts, values, count) {  // the count fullest hosts not down, fullest first
  const top = [];
  for (let i = 0; i < values.length; i++) {
    if (hosts.state[i] === 1 || (top.length === count && values[i] <= values[top[count - 1]])) continue;
    let k = top.length === count ? count - 1 : top.length;
    while (k > 0 && values[top[k - 1]] < values[i]) { top[k] = top[k - 1]; k--; }
    top[k] = i;
  }
  return top;
}

function renderFullest(hosts, values) {
  replaceRows(document.getElementById("fullest"), fullest(hosts, values, 20).map((i) => [
    hosts.names[i], hosts.zones[hosts.zone[i]], STATES[hosts.state[i]],
    fill(hosts, i, "ram"), fill(hosts, i, "vcpus"), fill(hosts, i, "disk")]), "no host has reported", 6);
}

function renderTables(data) {
  const instances = data.instances === null ? [] : Object.entries(data.instances);
  replaceRows(document.getElementById("instances"), instances.map(([state, count]) => [state, count]),
              data.instances_error || "no instance", 2);
  replaceRows(document.getElementById("moves"), (data.moves || []).map((m) => [
    m.created_at.replace("T", " ").slice(0, 19), m.instance_uuid, m.kind, m.source_host, m.dest_host,
    m.status === "finished" ? "waiting for confirmation" : m.status]),
  data.moves === null ? "the database cannot be read now" : "no move under way", 6);
  replaceRows(document.getElementById("refusals"), data.refusals.map((r) => {
    // Each instance by its name where it has one, its UUID on hover; by its UUID otherwise.
    const names = r.names || [];
    const shown = el("span", {class: "instances"});
    r.instances.slice(0, 3).forEach((uuid, k) => {
      if (k) shown.append(", ");
      shown.append(names[k] ? el("span", {class: "instance", title: uuid, "data-uuid": uuid}, names[k])
        : el("span", {class: "instance", "data-uuid": uuid}, uuid));
    });
    if (r.instances.length > 3) shown.append(` and ${r.instances.length - 3} more`);
    return [clock(r.at), shown, el("span", {class: "reason"}, r.reason)];
  }), "no refusal since the scheduler started", 3);
  replaceRows(document.getElementById("letters"), data.dead_letters.map((d) => [
    clock(d.at), d.queue, d.method || "-", el("span", {class: "reason"}, d.reason)]),
  "no dead letter since the scheduler started", 4);
}

function line(points, x, y, style) {
  const path = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  path.setAttribute("points", points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" "));
  path.setAttribute("fill", "none");
  for (const [key, value] of Object.entries(style)) path.setAttribute(key, value);
  return path;
}

function svg(tag, attributes, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

function niceTicks(max) {  // [0, step, ...] up to the first multiple of a 1-2-5 step at or above max
  const raw = Math.max(max, 1e-9) / 2;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
  const ticks = [];
  for (let v = 0; v < max + step - 1e-9; v += step) ticks.push(Number(v.toPrecision(12)));
  return ticks;
}

const TIME_STEPS = [10, 15, 30, 60, 120, 300, 600, 900, 1200, 1800];

function timeTicks(t0, t1) {  // at most 4 times on round seconds or minutes, and their labels
  const step = TIME_STEPS.find((s) => (t1 - t0) / s <= 4) || 3600;
  const two = (n) => String(n).padStart(2, "0");
  const ticks = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
    const d = new Date(t * 1000);
    ticks.push([t, `${two(d.getHours())}:${two(d.getMinutes())}` + (step < 60 ? `:${two(d.getSeconds())}` : "")]);
  }
  return ticks;
}

// The plot's frame (viewBox units): the counts above, the metric below, time along the bottom.
const PLOT = {width: 340, height: 150, left: 46, right: 8, counts: [8, 60], metric: [74, 126], axis: 140};

function metricUnit(metric) {
  return metric && metric.target_type === "utilization" ? "%" : "";
}

function yAxis(plot, [top, bottom], ticks, unit, title) {  // tick labels with units, grid lines, title
  const nodes = [];
  const max = ticks[ticks.length - 1] || 1;
  for (const v of ticks) {
    const y = bottom - (v / max) * (bottom - top);
    nodes.push(svg("line", {x1: plot.left, x2: plot.width - plot.right, y1: y, y2: y, class: "grid"}),
               svg("text", {x: plot.left - 3, y: y + 3, "text-anchor": "end", class: "ytick"}, `${v}${unit}`));
  }
  nodes.push(svg("text", {x: plot.left + 3, y: top + 8, class: "axis-title"}, title));
  return nodes;
}

function renderGroups(groups) {
  const container = document.getElementById("groups");
  if (groups === null) {
    container.replaceChildren(el("p", {class: "empty"}, "this scheduler runs no scaling controller ([scaling] enabled = false)"));
    return;
  }
  if (!groups.length) {
    container.replaceChildren(el("p", {class: "empty"}, "no scaling group synced by this scheduler in the last hour"));
    return;
  }
  const grid = el("div", {class: "groups"});
  const plot = PLOT;
  for (const group of groups) {
    const points = group.points;
    const [t0, t1] = [points[0][0], Math.max(points[points.length - 1][0], points[0][0] + 60)];
    const countTicks = niceTicks(Math.max(1, ...points.map((p) => Math.max(p[1], p[2]))));
    const metricTicks = niceTicks(Math.max(1, ...points.map((p) => Math.max(p[3] || 0, p[4] || 0))));
    const [top, metricTop] = [countTicks[countTicks.length - 1], metricTicks[metricTicks.length - 1]];
    const x = (t) => plot.left + ((t - t0) / (t1 - t0)) * (plot.width - plot.left - plot.right);
    const yIn = ([high, low], max) => (v) => low - (v / max) * (low - high);
    const yCount = yIn(plot.counts, top), yMetric = yIn(plot.metric, metricTop);
    const chart = svg("svg", {viewBox: `0 0 ${plot.width} ${plot.height}`, role: "img"});
    const counts = (k) => points.map((p) => [p[0], p[k]]);
    const metric = (k) => points.filter((p) => p[k] !== null).map((p) => [p[0], p[k]]);
    const unit = metricUnit(group.metric);
    chart.append(...yAxis(plot, plot.counts, countTicks, "", "instances"),
                 ...yAxis(plot, plot.metric, metricTicks, unit, group.metric ? group.metric.name : "metric"));
    for (const [t, label] of timeTicks(t0, t1)) {
      chart.append(svg("line", {x1: x(t), x2: x(t), y1: plot.metric[1], y2: plot.metric[1] + 3, class: "tick"}),
                   svg("text", {x: x(t), y: plot.axis + 6, "text-anchor": "middle", class: "xtick"}, label));
    }
    chart.append(line(counts(2), x, yCount, {stroke: "#7a8691", "stroke-dasharray": "4 3", "stroke-width": "1.5", class: "desired"}),
                 line(counts(1), x, yCount, {stroke: "#1f6feb", "stroke-width": "2", class: "members"}),
                 line(metric(4), x, yMetric, {stroke: "#d73027", "stroke-dasharray": "4 3", "stroke-width": "1.2", class: "target"}),
                 line(metric(3), x, yMetric, {stroke: "#e08214", "stroke-width": "1.8", class: "current"}));
    const now = points[points.length - 1];
    chart.setAttribute("aria-label", `${group.name}: ${now[1]} members, desired ${now[2]}`);
    const metricText = now[3] === null ? "its metric unread" : `metric ${now[3]}${unit} against ${now[4]}${unit}`;
    grid.append(el("div", {class: "group", "data-group": group.name},
                   el("h3", {}, group.name), chart,
                   el("p", {class: "caption"}, `${now[1]} members (blue), desired ${now[2]} (dashed); ${metricText} ` +
                      `(orange, target red) — since ${clock(t0)}`)));
  }
  container.replaceChildren(grid);
}

function render(data) {
  const started = performance.now();
  last = data;
  document.getElementById("scheduler").textContent = data.scheduler;
  renderSummary(data);
  const values = shares(data.hosts, document.getElementById("measure").value);
  renderHeatmap(data.hosts, values);
  renderFullest(data.hosts, values);
  renderTables(data);
  renderGroups(data.scaling_groups);
  window.berthRenderMs = performance.now() - started;
  window.berthRenders = (window.berthRenders || 0) + 1;
  if (window.berthRenders === 1) window.berthFirstRenderAt = performance.now();  // since navigation
}

function showFreshness() {
  const node = document.getElementById("freshness");
  if (!lastReadAt) return;
  const age = Math.round((Date.now() - lastReadAt.getTime()) / 1000);
  const stale = age * 1000 > 3 * REFRESH_MS;
  node.className = stale ? "stale" : "";
  node.textContent = stale ? `Cannot reach the scheduler: the figures below are ${age} s old`
    : `Updated ${lastReadAt.toLocaleTimeString()}, every ${REFRESH_MS / 1000} s`;
}

async function refresh() {
  try {
    const response = await fetch("status.json", {cache: "no-store"});
    if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
    const data = await response.json();
    lastReadAt = new Date();
    render(data);
  } catch (error) {
    if (!lastReadAt) document.getElementById("freshness").textContent = `Cannot read the status: ${error.message}`;
  }
  showFreshness();
  setTimeout(refresh, REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  for (const id of ["measure", "grouping"]) {
    document.getElementById(id).addEventListener("change", () => last && render(last));
  }
  setInterval(showFreshness, 1000);
  refresh();
});
