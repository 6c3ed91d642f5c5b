// The console's only script (no inline scripts anywhere: the Content-Security-Policy forbids them).
// It checks the editor's text with the server as the person types and uploads images and audio.
"use strict";

function csrf() {
  const main = document.getElementById("main");
  return main ? main.dataset.csrf || "" : "";
}

function setupEditor(form) {
  const text = form.querySelector("#text");
  const status = form.querySelector("#check");
  const message = form.querySelector("#message");
  const nameField = form.querySelector("[name=name]");
  let timer = null;
  let sequence = 0;

  async function check() {
    const mine = ++sequence;
    const body = new URLSearchParams({
      csrf: csrf(), text: text.value, message: message.value,
      name: nameField ? nameField.value : "",
    });
    status.textContent = "Checking…";
    status.className = "check";
    try {
      const answer = await fetch(form.dataset.check, {
        method: "POST", body, headers: { Accept: "application/json" }, credentials: "same-origin",
      });
      const found = await answer.json();
      if (mine !== sequence) return; // a newer check is on its way
      if (found.ok) {
        status.textContent = "✓ Valid: the server accepts this version.";
        status.className = "check ok";
      } else {
        // Every problem, each at the editor's line and column when it has one.
        status.replaceChildren(...found.errors.map((problem) => {
          const item = document.createElement("span");
          item.className = "problem";
          const where = problem.line ? ` (line ${problem.line}, column ${problem.column})` : "";
          item.textContent = `✗ ${problem.message}${where}`;
          return item;
        }));
        status.className = "check bad";
      }
    } catch (error) {
      if (mine === sequence) {
        status.textContent = "Could not reach the server to check.";
        status.className = "check bad";
      }
    }
  }

  function later() {
    clearTimeout(timer);
    timer = setTimeout(check, 400);
  }
  text.addEventListener("input", later);
  if (nameField) nameField.addEventListener("input", later);

  const file = form.querySelector("#file");
  file.addEventListener("change", async () => {
    if (!file.files.length) return;
    const data = new FormData();
    data.append("csrf", csrf());
    data.append("file", file.files[0]);
    status.textContent = "Uploading…";
    const answer = await fetch(form.dataset.upload, {
      method: "POST", body: data, headers: { Accept: "application/json" }, credentials: "same-origin",
    });
    const found = await answer.json();
    if (!answer.ok) {
      status.textContent = `✗ ${found.error}`;
      status.className = "check bad";
      return;
    }
    text.value = text.value.replace(/\s*$/, "\n") + found.snippet;
    file.value = "";
    check();
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const editor = document.getElementById("editor");
  if (editor) setupEditor(editor);
});

// A field that does not match its pattern says which format it wants (its title), not only
// "Please match the requested format"; typing again clears the message.
document.addEventListener("invalid", (event) => {
  const field = event.target;
  if (field.validity && field.validity.patternMismatch && field.title) {
    field.setCustomValidity(`Please use ${field.title}.`);
  }
}, true);
document.addEventListener("input", (event) => {
  const field = event.target;
  if (field.setCustomValidity) field.setCustomValidity("");
}, true);
