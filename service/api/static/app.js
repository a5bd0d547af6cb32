// gptoss-doctor page: posts the pasted text to /lookup and renders the answer.
// Every value from the response or the input goes into the DOM through textContent or
// setAttribute (never an HTML-parsing sink), and only http(s) URLs become links, so issue titles or pasted
// logs cannot inject markup or script.
"use strict";

(function () {
  const form = document.getElementById("lookup-form");
  const input = document.getElementById("error-input");
  const topK = document.getElementById("top-k");
  const tokenInput = document.getElementById("read-token");
  const button = document.getElementById("submit");
  const status = document.getElementById("status");
  const results = document.getElementById("results");
  const ISSUE_ID = /^([\w.-]+)\/([\w.-]+)#(\d+)$/;

  /** Build an element; string/number children become text nodes, null/false children are skipped. */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") node.className = String(value);
      else node.setAttribute(name, String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  /** The URL when it is absolute http(s), else null: javascript:, data: and relative junk never link. */
  function safeUrl(value) {
    if (typeof value !== "string") return null;
    try {
      const url = new URL(value);
      return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
    } catch (_err) {
      return null;
    }
  }

  /** A GitHub link for an owner/repo#N id (GitHub redirects /issues/N to the PR when it is one). */
  function idUrl(id) {
    const match = ISSUE_ID.exec(String(id));
    return match ? `https://github.com/${match[1]}/${match[2]}/issues/${match[3]}` : null;
  }

  /** A link when the URL is safe, else plain text. */
  function link(text, url) {
    const href = safeUrl(url);
    return href ? el("a", { href, rel: "noopener noreferrer" }, text) : el("span", {}, text);
  }

  const DOC_SOURCE = /^references?\/([\w-]+\.md)(#[\w-]*)?$/;

  /** A reference-doc section (references/known-issues.md#x) as a link to the doc this service serves. */
  function docUrl(source) {
    const match = DOC_SOURCE.exec(source);
    return match ? new URL(`/references/${match[1]}${match[2] || ""}`, window.location.origin).href : null;
  }

  /** A source reference: an issue id, a URL or a doc anchor such as references/known-issues.md#x. */
  function sourceNode(source) {
    const text = String(source);
    if (safeUrl(text)) return link(text, text);
    const url = idUrl(text) || docUrl(text);
    return url ? link(text, url) : el("code", {}, text);
  }

  function joined(nodes, sep) {
    const out = [];
    nodes.forEach((node, i) => {
      if (i) out.push(sep);
      out.push(node);
    });
    return out;
  }

  function sources(list) {
    if (!Array.isArray(list) || !list.length) return null;
    return el("p", { class: "meta" }, "Sources: ", joined(list.map(sourceNode), ", "));
  }

  function badge(text, cls) {
    return el("span", { class: `badge ${cls}` }, text);
  }

  function section(title, ...body) {
    const id = `h-${title.toLowerCase().replace(/[^a-z]+/g, "-")}`;
    return el("section", { class: "panel", "aria-labelledby": id }, el("h2", { id }, title), body);
  }

  function renderOrigin(analysis) {
    const origin = analysis.origin || {};
    return section(
      "Origin",
      el("p", {},
        el("span", { class: "origin-side" }, origin.side || "unknown"),
        origin.component ? [" \u2014 ", el("code", {}, origin.component)] : null),
      origin.explanation ? el("p", {}, origin.explanation) : null,
      analysis.category ? el("p", { class: "meta" }, "Category: ", el("code", {}, analysis.category)) : null,
    );
  }

  function renderQuery(query, analysis) {
    const rows = [];
    const signatures = (query && query.signatures) || [];
    if (signatures.length) {
      rows.push(el("h3", {}, "Error lines found"), signatures.map((s) => el("pre", {}, s)));
    }
    const versions = Object.entries(analysis.versions || {});
    const flags = analysis.flags || [];
    if (versions.length || flags.length || analysis.model || analysis.client) {
      const dl = el("dl", { class: "kv" });
      for (const [name, version] of versions) dl.append(el("dt", {}, name), el("dd", {}, el("code", {}, version)));
      if (analysis.model) dl.append(el("dt", {}, "model"), el("dd", {}, el("code", {}, analysis.model)));
      if (analysis.client) dl.append(el("dt", {}, "client"), el("dd", {}, analysis.client));
      if (analysis.engine) dl.append(el("dt", {}, "engine"), el("dd", {}, analysis.engine));
      if (flags.length) dl.append(el("dt", {}, "flags"), el("dd", {}, joined(flags.map((f) => el("code", {}, f)), " ")));
      rows.push(el("h3", {}, "Setup seen in the input"), dl);
    }
    return rows.length ? section("What the input says", rows) : null;
  }

  function renderTokens(tokens) {
    if (!Array.isArray(tokens) || !tokens.length) return null;
    const body = el("tbody", {});
    for (const token of tokens) {
      body.append(el("tr", {},
        el("td", {}, el("code", {}, token.id)),
        // JSON quoting makes whitespace and control characters visible.
        el("td", {}, el("code", {}, JSON.stringify(token.text ?? ""))),
        el("td", {}, token.special ? "special" : "text")));
    }
    const table = el("table", {},
      el("caption", { class: "meta" }, "Token ids named in the input, decoded with openai-harmony"),
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "id"), el("th", { scope: "col" }, "text"),
        el("th", { scope: "col" }, "kind"))),
      body);
    return section("Decoded tokens", el("div", { class: "table-wrap" }, table));
  }

  function renderValue(value) {
    if (value === null || value === undefined) return el("span", { class: "meta" }, "none");
    if (Array.isArray(value)) return el("pre", {}, value.map((v) => (typeof v === "string" ? v : JSON.stringify(v))).join("\n"));
    if (typeof value === "object") return el("pre", {}, JSON.stringify(value, null, 2));
    return el("code", {}, String(value));
  }

  function renderReproduction(reproduction) {
    if (!reproduction || typeof reproduction !== "object") return null;
    const dl = el("dl", { class: "kv" });
    for (const [key, value] of Object.entries(reproduction)) {
      dl.append(el("dt", {}, key.replace(/_/g, " ")), el("dd", {}, renderValue(value)));
    }
    return section("Reproduced with the Harmony parser", dl);
  }

  function confident(answer) {
    if (typeof answer.no_confident_match === "boolean") return !answer.no_confident_match;
    const issues = answer.issues || [];
    return issues.some((issue) => issue.confidence === "high" || issue.confidence === "medium");
  }

  function renderIssue(issue) {
    const title = issue.title || issue.id || "(untitled)";
    const url = safeUrl(issue.url) || idUrl(issue.id);
    const head = el("p", { class: "issue-title" }, link(title, url));
    const meta = el("p", { class: "meta" },
      issue.confidence ? badge(`${issue.confidence} confidence`, `conf-${issue.confidence}`) : null,
      issue.state ? badge(issue.state, `state-${issue.state}`) : null,
      issue.kind ? badge(issue.kind, "") : null,
      el("code", {}, issue.id || ""),
      typeof issue.score === "number" ? ` \u00b7 score ${issue.score.toFixed(2)}` : null);
    const why = Array.isArray(issue.why) && issue.why.length
      ? el("ul", { class: "why", "aria-label": "Why it matched" }, issue.why.map((w) => el("li", {}, w)))
      : null;
    const fixedBy = Array.isArray(issue.fixed_by) && issue.fixed_by.length
      ? el("p", { class: "meta" }, "Fixed by: ", joined(issue.fixed_by.map(sourceNode), ", "))
      : null;
    return el("li", { class: "issue" }, head, meta, why, fixedBy);
  }

  function renderIssues(answer) {
    const issues = answer.issues || [];
    const parts = [];
    if (!confident(answer)) {
      const analysis = answer.analysis || {};
      const origin = analysis.origin || {};
      // A log with no failing line: say that, and what the origin reading asks for (the lines above a wrapper).
      const why = analysis.failure_found === false
        ? `No failing line to match. ${origin.explanation || ""}`
        : issues.length
          ? "None of the known issues is close to this input; the weak candidates below are shown for reference only."
          : "None of the known issues is close to this input.";
      parts.push(el("p", { class: "panel notice", id: "no-match", role: "note" },
        el("strong", {}, "No confident match. "), why));
    }
    if (issues.length) parts.push(el("ol", { class: "issues" }, issues.map(renderIssue)));
    return section("Known issues", parts);
  }

  function renderFixes(fixes) {
    if (!Array.isArray(fixes) || !fixes.length) return null;
    return section("Fixes", el("ul", { class: "plain" }, fixes.map((fix) => el("li", {},
      el("p", {}, fix.confirmed ? badge("confirmed", "conf-high") : null, fix.summary || ""),
      Array.isArray(fix.steps) && fix.steps.length ? el("ol", {}, fix.steps.map((s) => el("li", {}, s))) : null,
      sources(fix.sources)))));
  }

  /** A typed setting: {flag, value, action} as "set --tool-call-parser openai" / "avoid ignore_eos". */
  function flagText(f) {
    if (typeof f === "string") return f;
    const name = String((f && f.flag) || "");
    const value = f && f.value !== null && f.value !== undefined ? String(f.value) : null;
    const shown = value === null ? name : name.startsWith("-") ? `${name} ${value}` : `${name}=${value}`;
    return `${(f && f.action) || "set"} ${shown}`;
  }

  function renderAdvice(advice) {
    if (!Array.isArray(advice) || !advice.length) return null;
    return section("Advice", el("ul", { class: "plain" }, advice.map((item) => el("li", {},
      el("p", {}, item.summary || ""),
      Array.isArray(item.flags) && item.flags.length
        ? el("p", { class: "meta" }, "Settings: ", joined(item.flags.map((f) => el("code", {}, flagText(f))), " "))
        : null,
      sources(item.sources)))));
  }

  /** The setting an action changes, as typed ("--tool-call-parser openai", "ignore_eos"), then a colon. */
  function actionSetting(a) {
    if (!a || !a.target || a.kind === "workaround" || a.kind === "check") return null;
    const target = String(a.target);
    const raw = a.value === null || a.value === undefined ? null : String(a.value);
    const value = raw === null || (a.kind === "avoid" && ["true", "1", "yes"].includes(raw.toLowerCase())) ? null : raw;
    const joiner = (a.kind === "set" || a.kind === "unset") && !target.startsWith("-") ? "=" : " ";
    return [el("code", {}, value === null ? target : `${target}${joiner}${value}`), ": "];
  }

  /** The verdict: problem, what happened, the status for the user's version, and up to three actions. */
  function renderDiagnosis(answer) {
    const d = answer.diagnosis;
    if (!d || typeof d !== "object") {
      const text = confident(answer)
        ? "No known problem in the reference docs matches this input; the closest issues and fixes are below."
        : "No confident match: none of the known problems or issues is close to this input.";
      return el("section", { class: "panel verdict none", id: "verdict", "aria-labelledby": "h-verdict" },
        el("h2", { id: "h-verdict" }, "Diagnosis"), el("p", { id: "verdict-none" }, text));
    }
    const verdict = d.verdict || {};
    const actions = Array.isArray(d.actions) ? d.actions : [];
    return el("section", { class: "panel verdict", id: "verdict", "aria-labelledby": "h-verdict" },
      el("h2", { id: "h-verdict" }, "Diagnosis: ", link(d.title || d.problem || "", docUrl(String(d.problem || "")))),
      el("p", { class: "meta" },
        d.confidence ? badge(`${d.confidence} confidence`, `conf-${d.confidence}`) : null,
        d.kind === "setup" ? badge("setup", "") : null,
        d.why ? ` ${d.why}` : null),
      d.summary ? el("p", {}, d.summary) : null,
      el("p", { class: `status status-${verdict.status || "unknown"}`, id: "verdict-status" },
        el("strong", {}, "Status: "), verdict.text || ""),
      actions.length
        ? el("ol", { class: "actions", id: "actions" }, actions.map((a) => el("li", {},
          el("p", {}, badge(a.kind || "", `act-${a.kind || ""}`), " ", actionSetting(a), a.text || "",
            a.when ? el("span", { class: "meta" }, ` (when ${a.when})`) : null),
          sources(a.sources))))
        : null);
  }

  /** Evidence folded under a summary line, so the verdict stays above the fold. */
  function folded(title, node, open) {
    if (!node) return null;
    return el("details", { class: "evidence", open: open ? "" : null }, el("summary", {}, title), node);
  }

  function renderIndex(answer) {
    const index = answer.index;
    if (!index) return null;
    const bits = [];
    if (index.documents !== undefined) bits.push(`${index.documents} documents`);
    if (index.issues !== undefined) bits.push(`${index.issues} issues`);
    if (index.built_at) bits.push(`built ${index.built_at}`);
    bits.push(index.github_synced_at ? `GitHub synced ${index.github_synced_at}` : "GitHub never synced");
    if (answer.degraded) bits.push("degraded: lexical search only");
    if (answer.partial && answer.partial.length) bits.push(`partial: out of time, skipped ${answer.partial.join(", ")}`);
    return el("p", { class: "meta" }, `Index: ${bits.join(" \u00b7 ")}`);
  }

  function render(answer) {
    const analysis = answer.analysis || {};
    const issues = answer.issues || [];
    const fixes = answer.fixes || [];
    const advice = answer.advice || [];
    const noVerdict = !answer.diagnosis;
    // Another model than gpt-oss: the page says so first, and there is no verdict to show.
    const scope = answer.scope_note
      ? el("p", { class: "panel notice", id: "outside-scope", role: "note" },
        el("strong", {}, "Outside what this tool covers. "), answer.scope_note)
      : null;
    results.replaceChildren(
      ...[scope].filter(Boolean),
      renderDiagnosis(answer),
      ...[
        folded(`Known issues (${issues.length})`, renderIssues(answer), noVerdict),
        folded(`Fixes (${fixes.length})`, renderFixes(fixes), noVerdict),
        folded(`Advice (${advice.length})`, renderAdvice(advice), false),
        folded("Origin", renderOrigin(analysis), false),
        folded("Decoded tokens", renderTokens(analysis.tokens), false),
        folded("Reproduced with the Harmony parser", renderReproduction(analysis.reproduction), false),
        folded("What the input says", renderQuery(answer.query, analysis), false),
        renderIndex(answer),
      ].filter(Boolean),
    );
    results.hidden = false;
    // The verdict is what a reader acts on: bring it to the top of the viewport, whatever the input's length.
    const verdict = document.getElementById("verdict");
    if (verdict && typeof verdict.scrollIntoView === "function") verdict.scrollIntoView({ block: "start" });
  }

  /** An RFC 9457 problem (or a transport failure) as an alert panel in ``container``. */
  function showProblem(container, problem, httpStatus) {
    const title = (problem && problem.title) || `Request failed (HTTP ${httpStatus})`;
    const detail = problem && problem.detail;
    container.replaceChildren(el("div", { class: "panel problem", role: "alert" },
      el("h2", {}, title), detail ? el("p", {}, detail) : null));
    container.hidden = false;
  }

  function renderProblem(problem, httpStatus) {
    showProblem(results, problem, httpStatus);
  }

  /** POST ``payload`` as JSON (with the page's bearer token when one is typed): {response, body or null}. */
  async function postJson(path, payload) {
    const headers = { "Content-Type": "application/json", Accept: "application/json" };
    if (tokenInput.value.trim()) headers.Authorization = `Bearer ${tokenInput.value.trim()}`;
    const response = await fetch(path, { method: "POST", headers, body: JSON.stringify(payload) });
    let body = null;
    try {
      body = await response.json();
    } catch (_err) {
      body = null;
    }
    return { response, body };
  }

  async function submit() {
    const text = input.value;
    if (!text.trim()) {
      status.textContent = "Paste an error message or a log first.";
      input.focus();
      return;
    }
    const k = Math.min(50, Math.max(1, parseInt(topK.value, 10) || 5));
    topK.value = String(k);
    button.disabled = true;
    form.setAttribute("aria-busy", "true");
    status.textContent = "Diagnosing\u2026";
    const started = performance.now();
    try {
      const { response, body } = await postJson("/lookup", { error: text, top_k: k });
      if (!response.ok || !body) {
        renderProblem(body, response.status);
        status.textContent = "The lookup failed.";
        return;
      }
      render(body);
      const count = (body.issues || []).length;
      const ms = performance.now() - started;
      const took = ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
      status.textContent = confident(body)
        ? `Done in ${took}: ${count} known issue${count === 1 ? "" : "s"} found.`
        : `Done in ${took}: no confident match.`;
    } catch (err) {
      renderProblem({ title: "The service could not be reached", detail: String(err) }, 0);
      status.textContent = "The lookup failed.";
    } finally {
      button.disabled = false;
      form.removeAttribute("aria-busy");
    }
  }

  /** Run ``submit`` on the form's submit and on Ctrl+Enter (Cmd+Enter on a Mac) in its text area. */
  function wireSubmit(formNode, textArea, submitFn) {
    formNode.addEventListener("submit", (event) => {
      event.preventDefault();
      submitFn();
    });
    textArea.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        submitFn();
      }
    });
  }

  // The setup check (check.js) renders and submits with the same helpers.
  window.gptossDoctorUi = Object.freeze({ el, sourceNode, badge, section, sources, postJson, showProblem, wireSubmit });

  wireSubmit(form, input, submit);
})();
