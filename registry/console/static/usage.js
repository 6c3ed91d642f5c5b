// The serve ledger's charts: every <canvas data-chart="ID"> is drawn as stacked bars from the JSON
// of <script type="application/json" id="ID"> (written by the server, never executed), with the
// vendored Chart.js. No inline script: the Content-Security-Policy forbids it.
"use strict";

const PALETTE = [
  "#1b6ac9", "#e07b00", "#2e9d5b", "#c23b3b", "#7a4fc9", "#0f8a8a",
  "#b8860b", "#d0488f", "#5a6b7b", "#6b8e23", "#8b4513", "#4169e1", "#999999",
];

function drawCharts() {
  if (typeof Chart === "undefined") {
    return;
  }
  for (const canvas of document.querySelectorAll("canvas[data-chart]")) {
    const source = document.getElementById(canvas.dataset.chart);
    if (!source) {
      continue;
    }
    const data = JSON.parse(source.textContent);
    const datasets = data.series.map((series, i) => ({
      label: series.name,
      data: series.data,
      backgroundColor: PALETTE[i % PALETTE.length],
      borderWidth: 0,
    }));
    const chart = new Chart(canvas, {
      type: "bar",
      data: { labels: data.labels, datasets },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        scales: {
          x: { stacked: true, ticks: { maxRotation: 0, autoSkip: true } },
          y: { stacked: true, beginAtZero: true, ticks: { precision: 0 } },
        },
        plugins: { legend: { position: "bottom" } },
      },
    });
    canvas.dataset.drawn = String(chart.data.datasets.length);
  }
}

document.addEventListener("DOMContentLoaded", drawCharts);
