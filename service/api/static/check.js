// gptoss-doctor page, "Check a setup" tab: posts a command, args line or request body to /v1/check and
// renders the findings. It builds the DOM with app.js's helpers (textContent only, safe links).
"use strict";

(function () {
  const ui = window.gptossDoctorUi;
  const tabs = Array.from(document.querySelectorAll('[role="tab"]'));
  const form = document.getElementById("check-form");
  const input = document.getElementById("check-input");
  const button = document.getElementById("check-submit");
  const status = document.getElementById("check-status");
  const results = document.getElementById("check-results");
  const SEVERITY_CLASS = { error: "sev-error", warning: "sev-warning", info: "sev-info" };

  /** Show one tab's panel; the selected tab is the only one in the Tab order (ARIA tabs pattern). */
  function select(tab, focus) {
    for (const other of tabs) {
      const selected = other === tab;
      other.setAttribute("aria-selected", String(selected));
      other.tabIndex = selected ? 0 : -1;
      document.getElementById(other.getAttribute("aria-controls")).hidden = !selected;
    }
    if (focus) tab.focus();
  }

  tabs.forEach((tab, index) => {
    tab.addEventListener("click", () => select(tab, false));
    tab.addEventListener("keydown", (event) => {
      const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
      if (step === undefined) return;
      event.preventDefault();
      select(tabs[(index + step + tabs.length) % tabs.length], true);
    });
  });

  function changeText(change) {
    return [change.action, change.target, change.value].filter((part) => part).join(" ");
  }

  function renderFinding(finding) {
    return ui.el("li", { class: "finding" },
      ui.el("p", {},
        ui.badge(finding.severity, SEVERITY_CLASS[finding.severity] || ""), " ",
        ui.el("code", {}, changeText(finding.change)), " ",
        ui.el("span", { class: "meta" }, `(${finding.title})`)),
      ui.el("p", {}, finding.message),
      Array.isArray(finding.found) && finding.found.length
        ? ui.el("p", { class: "meta found" }, "You have: ", ui.el("code", {}, `${finding.change.target} ${finding.found.join(", ")}`))
        : null,
      finding.applies_to ? ui.el("p", { class: "meta" }, `Applies to ${finding.applies_to}; when: ${finding.when}`)
        : ui.el("p", { class: "meta" }, `When: ${finding.when}`),
      ui.sources(finding.sources));
  }

  function render(report) {
    const summary = report.ok
      ? "No known problem applies to this setup."
      : `${report.errors} error${report.errors === 1 ? "" : "s"}, ${report.warnings} warning${report.warnings === 1 ? "" : "s"}.`;
    const read = ui.el("p", { class: "meta" }, `Read as ${report.kind}${report.model ? ` (${report.model})` : ""}: `,
      (report.read || []).join("; "));
    results.replaceChildren(ui.section("Findings",
      ui.el("p", { id: "check-summary" }, summary), read,
      report.findings.length ? ui.el("ul", { class: "findings" }, report.findings.map(renderFinding)) : null));
    results.hidden = false;
  }

  async function submit() {
    if (!input.value.trim()) {
      status.textContent = "Paste a vllm serve command, a start-up line or a request body first.";
      input.focus();
      return;
    }
    button.disabled = true;
    status.textContent = "Checking\u2026";
    try {
      const { response, body } = await ui.postJson("/v1/check", { input: input.value });
      if (!response.ok || !body) {
        ui.showProblem(results, body, response.status);
        status.textContent = "The check failed.";
        return;
      }
      render(body);
      status.textContent = body.ok ? "Checked: nothing to change." : "Checked.";
    } catch (err) {
      ui.showProblem(results, { title: "The service could not be reached", detail: String(err) }, 0);
      status.textContent = "The check failed.";
    } finally {
      button.disabled = false;
    }
  }

  ui.wireSubmit(form, input, submit);
})();
