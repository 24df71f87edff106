"""The upload page at ``/``: pick an image, see the label and a bar per class. One self-contained HTML document (no
external scripts, styles or fonts), so it works offline and behind any proxy."""

from __future__ import annotations

__all__ = ["PAGE"]

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpukit serve</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body { font: 16px/1.4 system-ui, sans-serif; margin: 2rem auto; max-width: 40rem; color: #222; background: #fafafa; }
h1 { font-size: 1.4rem; } .muted { color: #666; font-size: .9rem; }
#drop { border: 2px dashed #888; border-radius: 8px; padding: 1.5rem; text-align: center; background: #fff; }
#preview { max-width: 12rem; max-height: 12rem; display: none; margin: 1rem auto; }
#label { font-size: 1.6rem; font-weight: 600; margin: 1rem 0 .5rem; }
.row { display: flex; align-items: center; margin: .25rem 0; }
.name { width: 8rem; overflow: hidden; text-overflow: ellipsis; }
.bar { height: 1.2rem; background: #3b7ddd; border-radius: 3px; min-width: 2px; }
.pct { margin-left: .5rem; font-variant-numeric: tabular-nums; }
#error { color: #b00020; } #timing { font-family: monospace; font-size: .8rem; color: #555; }
</style></head>
<body>
<h1>gpukit serve</h1>
<p class="muted" id="model">loading the model description…</p>
<div id="drop"><p>Choose an image (JPEG, PNG, GIF or WebP), or drop one here.</p>
<input type="file" id="file" accept="image/jpeg,image/png,image/gif,image/webp">
<p><label>API key (if the server needs one): <input type="password" id="key" size="20"></label></p></div>
<img id="preview" alt="the uploaded image">
<div id="label"></div><div id="bars"></div><p id="error"></p><p id="timing"></p>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
fetch("v1/model").then((r) => r.json()).then((m) => {
  $("model").textContent = m.model ? `${m.model}, ${m.image_size}×${m.image_size}, classes: ${m.classes.join(", ")}`
                                   : "the model is still loading";
}).catch(() => { $("model").textContent = "model description unavailable"; });
function show(result) {
  $("label").textContent = `${result.label} (${(100 * result.probability).toFixed(1)} %)`;
  const bars = $("bars"); bars.textContent = "";
  for (const [name, p] of Object.entries(result.scores)) {
    const row = document.createElement("div"); row.className = "row";
    const n = document.createElement("span"); n.className = "name"; n.textContent = name;
    const b = document.createElement("div"); b.className = "bar"; b.style.width = `${(20 * p).toFixed(2)}rem`;
    const t = document.createElement("span"); t.className = "pct"; t.textContent = `${(100 * p).toFixed(1)} %`;
    row.append(n, b, t); bars.append(row);
  }
}
async function send(file) {
  $("error").textContent = ""; $("label").textContent = "…"; $("bars").textContent = "";
  $("preview").src = URL.createObjectURL(file); $("preview").style.display = "block";
  const form = new FormData(); form.append("file", file);
  const headers = $("key").value ? { "X-API-Key": $("key").value } : {};
  try {
    const r = await fetch("v1/predict", { method: "POST", body: form, headers });
    $("timing").textContent = r.headers.get("Server-Timing") || "";
    const body = await r.json();
    if (!r.ok) {
      $("label").textContent = ""; $("error").textContent = `${r.status}: ${body.detail || body.error}`; return;
    }
    show(body);
  } catch (e) { $("label").textContent = ""; $("error").textContent = String(e); }
}
$("file").addEventListener("change", () => { if ($("file").files.length) send($("file").files[0]); });
$("drop").addEventListener("dragover", (e) => e.preventDefault());
$("drop").addEventListener("drop", (e) => {
  e.preventDefault(); if (e.dataTransfer.files.length) send(e.dataTransfer.files[0]);
});
</script></body></html>
"""
