/* Chapter 9's attention explorer (loaded on every page by _config.yml; it acts only where a notebook output holds an
   explorer's data: <div class="attn-explorer"> with a <script type="application/json"> that
   transformer_course/explorer/pages.py wrote; explorer_live.py's outputs carry a copy of this file inline, for JupyterLab,
   where the book's files are not loaded). The data is in the page because a page opened from a file may not fetch
   files. Data: per sentence, per kind of attention, maps[layer][head][query] = a row of weights in thousandths,
   without its trailing zeros. tests/test_browser_explorer.py reads the weights it shows back against the model. */
"use strict";

(() => {
  // Once per page: a second copy of this script (the inline one of an output of explorer_live.show, on a page that
  // loads this file already, or in a notebook that shows several) asks the first to draw what is new.
  if (window.attnExplorer) {
    window.attnExplorer.start();
    return;
  }
  let drawn = 0; // explorers drawn on this page: each one's element ids are numbered apart

  // ColorBrewer's sequential "Blues": one hue from light to dark, readable with every common colour-vision deficiency
  // and in grey. Anchors at 0, 0.25, 0.5, 0.75, 1, interpolated linearly.
  const RAMP = [
    [247, 251, 255],
    [198, 219, 239],
    [107, 174, 214],
    [33, 113, 181],
    [8, 48, 107],
  ];
  const TOP = 3; // how many of the heaviest weights the status line reads out

  function colour(w) {
    const x = Math.min(1, Math.max(0, w)) * (RAMP.length - 1);
    const i = Math.min(RAMP.length - 2, Math.floor(x));
    const t = x - i;
    return RAMP[i].map((c, k) => Math.round(c + t * (RAMP[i + 1][k] - c)));
  }

  // Black or white text, whichever contrasts more with the background (WCAG's relative luminance): at least 4.5:1.
  function ink(rgb) {
    const [r, g, b] = rgb.map((c) => {
      const s = c / 255;
      return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    });
    const light = 0.2126 * r + 0.7152 * g + 0.0722 * b;
    return (light + 0.05) / 0.05 >= 1.05 / (light + 0.05) ? "#000" : "#fff";
  }

  const css = (rgb) => `rgb(${rgb.join(",")})`;
  const quote = (piece) => `\u201c${piece}\u201d`;

  function element(tag, attributes = {}, text = "") {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    if (text) node.textContent = text;
    return node;
  }

  // What the rows and columns of each kind of map are (the decoder's positions are labelled by the piece they write;
  // the GRU's by the pieces of its own translation).
  const SOURCE = [(s) => s.source, "Source pieces, read (keys)"];
  const WRITTEN = [(s) => s.written, "Output positions, each labelled by the piece it writes (queries)"];
  const SIDES = {
    encoder: { q: [(s) => s.source, "Source pieces, each reading the sentence (queries)"], k: SOURCE },
    decoder: { q: WRITTEN, k: [(s) => s.read, "The decoder's input: <bos> and the pieces written before (keys)"] },
    cross: { q: WRITTEN, k: SOURCE },
    gru: { q: [(s) => s.gru.written, "The GRU's output positions, each labelled by the piece it writes"], k: SOURCE },
  };

  function build(root, number) {
    const data = JSON.parse(root.querySelector("script.attn-explorer-data").textContent);
    const scale = 10 ** data.decimals;
    const id = (name) => `attn-explorer-${number}-${name}`;
    const state = { sentence: 0, kind: "cross", layer: data.layers.cross - 1, head: "mean", side: "q", index: 0 };

    // --- the controls ------------------------------------------------------------------------------------------
    const controls = element("div", { class: "attn-controls" });
    function select(name, label, options) {
      const wrap = element("label", { class: `attn-control attn-control-${name}` });
      wrap.append(element("span", {}, label));
      const box = element("select", { class: `attn-${name}` });
      for (const [value, text] of options) box.append(element("option", { value: String(value) }, text));
      wrap.append(box);
      controls.append(wrap);
      return box;
    }
    const sentence = select(
      "sentence",
      "Sentence",
      data.sentences.map((s, i) => [i, `${s.text} (${s.source.length} pieces; ${s.note})`]),
    );
    const kind = select("kind", "Attention", Object.entries(data.kinds));
    const layer = select("layer", "Layer", []);
    const head = select("head", "Head", [["mean", `mean of the ${data.heads} heads`]]);
    for (let h = 0; h < data.heads; h++) head.append(element("option", { value: String(h) }, `head ${h + 1}`));

    const outputs = element("dl", { class: "attn-outputs" });
    const queryCaption = element("p", { class: "attn-caption", id: id("queries") });
    const queries = element("div", { class: "attn-row", role: "group", "aria-labelledby": id("queries") });
    const keyCaption = element("p", { class: "attn-caption", id: id("keys") });
    const keys = element("div", { class: "attn-row", role: "group", "aria-labelledby": id("keys") });
    const status = element("p", { class: "attn-status", role: "status", "aria-live": "polite" });
    const tokens = element("div", { class: "attn-tokens" });
    const help = element(
      "p",
      { class: "attn-help" },
      "Hover over a piece, or Tab to a row and move along it with the arrow keys: the other row is shaded by " +
        "its weights, and the heatmap outlines its row or column.",
    );
    tokens.append(help, queryCaption, queries, keyCaption, keys, status);
    const figure = element("figure", { class: "attn-heatmap" });
    // chapter 4's GRU: its alignment beside the Transformer's map, when a kind of the Transformer's is shown
    const gruFigure = element("figure", { class: "attn-heatmap attn-gru-map" });
    const maps = element("div", { class: "attn-maps" });
    maps.append(figure, gruFigure);
    const legend = element("p", { class: "attn-legend" });
    legend.append(element("span", {}, "0"), element("span", { class: "attn-ramp", "aria-hidden": "true" }));
    legend.append(element("span", {}, "1: the whole of a query's attention"));
    legend.querySelector(".attn-ramp").style.background = `linear-gradient(to right, ${RAMP.map(css).join(", ")})`;
    const body = element("div", { class: "attn-body" });
    body.append(tokens, maps);
    const beam = beamView();
    root.replaceChildren(controls, outputs, body, legend, beam.box);

    // --- the numbers ---------------------------------------------------------------------------------------------
    const current = () => data.sentences[state.sentence];
    const labels = (side) => SIDES[state.kind][side][0](current());

    // The shown map (T_q, T_k) as weights in [0, 1]: one head's, or the mean of the heads' stored thousandths.
    function weights() {
      const maps = current().maps[state.kind][state.layer];
      const width = labels("k").length;
      const heads = state.head === "mean" || maps.length === 1 ? maps.map((_, h) => h) : [Number(state.head)];
      // a stored row lacks its trailing zeros: a missing entry is 0
      const weight = (q, k) => heads.reduce((sum, h) => sum + (maps[h][q][k] || 0), 0) / heads.length / scale;
      return maps[0].map((_, q) => Array.from({ length: width }, (_, k) => weight(q, k)));
    }

    // --- drawing ---------------------------------------------------------------------------------------------------
    function tokenRow(row, side, pieces) {
      row.replaceChildren(
        ...pieces.map((piece, i) => {
          const button = element("button", { type: "button", class: "attn-token", "data-side": side });
          button.dataset.index = String(i);
          button.append(element("span", { class: "attn-piece" }, piece), element("span", { class: "attn-weight" }));
          return button;
        }),
      );
    }

    function heatmap(matrix) {
      const rows = matrix.length;
      const cols = matrix[0].length;
      const ns = "http://www.w3.org/2000/svg";
      const svg = document.createElementNS(ns, "svg");
      svg.setAttribute("viewBox", `0 0 ${cols} ${rows}`);
      svg.setAttribute("role", "img");
      svg.setAttribute("preserveAspectRatio", "xMinYMin meet");
      svg.style.width = `${Math.min(24 * cols, 360)}px`;
      figure.style.width = svg.style.width; // the caption wraps under the map instead of pushing it below the tokens
      svg.style.aspectRatio = `${cols} / ${rows}`;
      matrix.forEach((row, q) =>
        row.forEach((w, k) => {
          const cell = document.createElementNS(ns, "rect");
          for (const [name, value] of Object.entries({ x: k, y: q, width: 1, height: 1, fill: css(colour(w)) }))
            cell.setAttribute(name, value);
          cell.dataset.q = String(q);
          cell.dataset.k = String(k);
          cell.dataset.weight = w.toFixed(3);
          svg.append(cell);
        }),
      );
      const mark = document.createElementNS(ns, "rect");
      mark.setAttribute("class", "attn-mark");
      svg.append(mark);
      const lower = (text) => text.charAt(0).toLowerCase() + text.slice(1);
      const q = lower(SIDES[state.kind].q[1].split(",")[0]);
      const k = lower(SIDES[state.kind].k[1].split(" (")[0]);
      svg.setAttribute(
        "aria-label",
        `Heatmap of all the weights shown: ${rows} rows, ${q}, by ${cols} columns, ${k}; darker is more weight.`,
      );
      const who = paired() ? "The Transformer's map. " : "";
      const caption = element("figcaption", {}, `${who}Rows: ${q}, top to bottom. Columns: ${k}, left to right.`);
      figure.replaceChildren(svg, caption);
    }

    // The GRU's alignment is drawn beside a map of the Transformer's, for the same sentence (not beside its own)
    const paired = () => state.kind !== "gru" && Boolean(current().gru);

    // The GRU's alignment (T_y, T_x) of its own translation, each row labelled by the piece it writes. The labels
    // are HTML beside the SVG, not text inside it: drawn in the map's units, they shrank with the map (7 px for the
    // longest sentence). A row is at least as tall as its label (--attn-row, explorer.css), its cells as wide as the
    // column allows: the cells stretch (preserveAspectRatio="none"); darker is more weight, as in the Transformer's.
    function gruMap() {
      gruFigure.hidden = !paired();
      body.classList.toggle("attn-paired", paired());
      if (!paired()) return gruFigure.replaceChildren();
      const s = current();
      const rows = s.maps.gru[0][0];
      const cols = s.source.length;
      const names = s.gru.written;
      const ns = "http://www.w3.org/2000/svg";
      const svg = document.createElementNS(ns, "svg");
      svg.setAttribute("viewBox", `0 0 ${cols} ${rows.length}`);
      svg.setAttribute("role", "img");
      svg.setAttribute("preserveAspectRatio", "none");
      svg.style.width = `${Math.min(24 * cols, 320)}px`;
      svg.style.aspectRatio = `${cols} / ${rows.length}`;
      svg.style.minHeight = `calc(${rows.length} * var(--attn-row) + 2px)`; // + its border
      rows.forEach((row, q) => {
        for (let k = 0; k < cols; k++) {
          const w = (row[k] || 0) / scale;
          const cell = document.createElementNS(ns, "rect");
          for (const [name, value] of Object.entries({ x: k, y: q, width: 1, height: 1, fill: css(colour(w)) }))
            cell.setAttribute(name, value);
          Object.assign(cell.dataset, { q: String(q), k: String(k), weight: w.toFixed(3) });
          svg.append(cell);
        }
      });
      svg.setAttribute(
        "aria-label",
        `Heatmap of the GRU's alignment: ${rows.length} rows, the pieces of its own translation ` +
          `(${names.join(" ")}), by ${cols} columns, the source pieces; darker is more weight.`,
      );
      // the SVG's name says the pieces already: the labels are for the eye (a long one is cut, whole in its title)
      const labels = element("div", { class: "attn-gru-labels", "aria-hidden": "true" });
      for (const name of names.slice(0, rows.length)) {
        const label = element("div", { class: "attn-gru-label", title: name });
        label.append(element("span", {}, name));
        labels.append(label);
      }
      const map = element("div", { class: "attn-gru-body" });
      map.append(labels, svg);
      const caption = element(
        "figcaption",
        {},
        `Chapter 4's GRU with attention, its alignment while it writes its own translation: rows labelled by ` +
          `the pieces it writes, top to bottom. Columns: source pieces, left to right.`,
      );
      gruFigure.replaceChildren(map, caption);
    }

    function shade(button, w) {
      const rgb = colour(w);
      button.style.background = css(rgb);
      button.style.color = ink(rgb);
      button.dataset.weight = String(w);
      button.querySelector(".attn-weight").textContent = w.toFixed(2);
      const piece = button.querySelector(".attn-piece").textContent;
      button.setAttribute("aria-label", `${piece}: weight ${w.toFixed(3)}`);
    }

    function plain(button, current) {
      button.style.background = "";
      button.style.color = "";
      delete button.dataset.weight;
      button.querySelector(".attn-weight").textContent = "";
      button.classList.toggle("attn-current", current);
      const piece = button.querySelector(".attn-piece").textContent;
      const side = button.dataset.side === "q" ? "reading" : "read";
      button.setAttribute("aria-label", `${piece} (${side}, position ${Number(button.dataset.index) + 1})`);
    }

    function show() {
      const matrix = weights();
      const { side, index } = state;
      const other = side === "q" ? keys : queries;
      const own = side === "q" ? queries : keys;
      const shown = side === "q" ? matrix[index] : matrix.map((row) => row[index]);
      own.querySelectorAll(".attn-token").forEach((b, i) => {
        plain(b, i === index);
        b.classList.remove("attn-shaded");
        b.tabIndex = i === index ? 0 : -1;
      });
      other.querySelectorAll(".attn-token").forEach((b, i) => {
        b.classList.remove("attn-current");
        b.classList.add("attn-shaded");
        shade(b, shown[i]);
        if (!other.contains(document.activeElement)) b.tabIndex = i === 0 ? 0 : -1;
      });
      const mark = figure.querySelector(".attn-mark");
      const cols = matrix[0].length;
      const box = side === "q" ? [0, index, cols, 1] : [index, 0, 1, matrix.length];
      ["x", "y", "width", "height"].forEach((name, i) => mark.setAttribute(name, box[i]));
      const names = labels(side === "q" ? "k" : "q");
      const top = shown
        .map((w, i) => [w, i])
        .sort((a, b) => b[0] - a[0] || a[1] - b[1])
        .slice(0, TOP)
        .map(([w, i]) => `${quote(names[i])} ${w.toFixed(2)}`);
      const piece = quote(labels(side)[index]);
      const verb = side === "q" ? "reads most" : "is read most by";
      status.textContent = `${piece} (position ${index + 1}) ${verb}: ${top.join(", ")}.`;
    }

    function redraw() {
      const s = current();
      outputs.replaceChildren();
      for (const [name, result] of [
        ["Greedy", s.greedy],
        [`Beam search, K = ${data.beam_size}`, s.beam],
        ["GRU with attention, greedy", s.gru],
      ]) {
        if (!result) continue; // the GRU's, when the data has it
        outputs.append(element("dt", {}, name));
        const scored = "log_prob" in result; // the GRU's translation comes without scores
        const scores = scored ? ` (log P ${result.log_prob.toFixed(2)}, score ${result.score.toFixed(2)})` : "";
        outputs.append(element("dd", {}, result.text + scores));
      }
      queryCaption.textContent = SIDES[state.kind].q[1];
      keyCaption.textContent = SIDES[state.kind].k[1];
      tokenRow(queries, "q", labels("q"));
      tokenRow(keys, "k", labels("k"));
      state.index = Math.min(state.index, labels(state.side).length - 1);
      heatmap(weights());
      gruMap();
      show();
      beam.draw();
    }

    // --- the beam, step by step: data.sentences[i].steps[t - 1] = {live: [[back, piece, log P], ...], done: [[back,
    // piece, log P, score], ...]}, best first; back is the index of the live hypothesis of step t - 1 that it extends
    // (step 0: <bos> alone). A hypothesis is spelled out by following the back-pointers.
    function beamView() {
      const box = element("div", { class: "attn-beam", role: "group", "aria-labelledby": id("beam") });
      const title = element("p", { class: "attn-caption", id: id("beam") });
      const bar = element("div", { class: "attn-step-bar" });
      const label = element("label", { class: "attn-control attn-step" });
      const range = element("input", { type: "range", class: "attn-step-range", min: "1", step: "1" });
      label.append(element("span", {}, "Step"), range);
      const prev = element("button", { type: "button", class: "attn-step-prev" }, "Previous step");
      const next = element("button", { type: "button", class: "attn-step-next" }, "Next step");
      bar.append(label, prev, next);
      const said = element("p", { class: "attn-status attn-beam-status", role: "status", "aria-live": "polite" });
      const liveTitle = element("p", { class: "attn-caption", id: id("live") });
      const live = element("ol", { class: "attn-hyps attn-live", "aria-labelledby": id("live") });
      const doneTitle = element("p", { class: "attn-caption", id: id("done") });
      const done = element("ol", { class: "attn-hyps attn-done", "aria-labelledby": id("done") });
      const chosen = element("p", { class: "attn-chosen" });
      box.append(title, bar, said, liveTitle, live, doneTitle, done, chosen);
      const at = { sentence: -1, step: 1 };
      const spell = (pieces) => pieces.join(" ");
      const number = (x) => x.toFixed(2).replace("-", "\u2212");

      function item(list, pieces, attributes, text) {
        const li = element("li", attributes);
        li.dataset.pieces = JSON.stringify(pieces);
        li.append(element("span", { class: "attn-hyp" }, spell(pieces)), element("span", {}, text));
        list.append(li);
      }

      function draw() {
        const s = current();
        if (!s.steps) return (box.hidden = true);
        if (at.sentence !== state.sentence) Object.assign(at, { sentence: state.sentence, step: 1 });
        const steps = s.steps.steps;
        const n = steps.length;
        title.textContent = `The beam (K = ${data.beam_size}, \u03b1 = ${data.alpha}), step by step: ${n} steps`;
        range.max = String(n);
        range.value = String(at.step);
        range.setAttribute("aria-valuetext", `step ${at.step} of ${n}`);
        // not disabled at the ends (a disabled button would drop the keyboard's focus): they stay put there
        prev.setAttribute("aria-disabled", String(at.step <= 1));
        next.setAttribute("aria-disabled", String(at.step >= n));
        // the hypotheses after each step up to the one shown, spelled out through the back-pointers
        let prefixes = [[]];
        let before = prefixes;
        const finished = [];
        steps.slice(0, at.step).forEach((step, t) => {
          step.done.forEach(([b, piece, logp, score]) =>
            finished.push({ pieces: [...prefixes[b], piece], logp, score, step: t + 1, back: b }),
          );
          before = prefixes;
          prefixes = step.live.map(([b, piece]) => [...prefixes[b], piece]);
        });
        finished.sort((a, b) => b.score - a.score); // stable: ties keep the order they finished in
        const step = steps[at.step - 1];
        const from = (b) => (at.step === 1 ? "<bos>" : `${b + 1}: ${spell(before[b])}`);
        const back = at.step - 1;
        liveTitle.textContent =
          `Live hypotheses after step ${at.step}, best first (log P; the one of step ${back} each extends)`;
        live.replaceChildren();
        step.live.forEach(([b, , logp], i) => {
          const text = ` log P ${number(logp)}; extends ${from(b)}`;
          item(live, prefixes[i], { "data-back": String(b), "data-logp": String(logp) }, text);
        });
        if (!step.live.length) live.append(element("li", { class: "attn-none" }, "none: the search has stopped"));
        doneTitle.textContent = `Finished so far, best score first (score = log P / lp(n), n with <eos>)`;
        done.replaceChildren();
        for (const h of finished) {
          const now = h.step === at.step ? ", new at this step" : "";
          const text = ` score ${number(h.score)} (log P ${number(h.logp)}; finished at step ${h.step}${now})`;
          item(done, h.pieces, { "data-score": String(h.score), "data-step": String(h.step) }, text);
        }
        if (!finished.length) done.append(element("li", { class: "attn-none" }, "none yet"));
        said.textContent =
          `Step ${at.step} of ${n}: ${step.live.length} live, ${step.done.length} finishing at this step, ` +
          `${finished.length} finished so far.`;
        chosen.replaceChildren();
        delete chosen.dataset.pieces;
        if (at.step === n && finished.length) {
          const why =
            s.steps.stop === "limit"
              ? "the length limit is reached, and the best candidates finish as they are"
              : `${data.beam_size} hypotheses have finished`;
          chosen.append(`The search stops: ${why}. Chosen, the best score: `);
          chosen.append(element("strong", { class: "attn-hyp" }, spell(finished[0].pieces)));
          chosen.append(` (score ${number(finished[0].score)}), the beam's output above.`);
          chosen.dataset.pieces = JSON.stringify(finished[0].pieces);
        }
      }

      const go = (t) => {
        at.step = Math.max(1, Math.min(current().steps.steps.length, t));
        draw();
      };
      range.addEventListener("input", () => go(Number(range.value)));
      prev.addEventListener("click", () => go(at.step - 1));
      next.addEventListener("click", () => go(at.step + 1));
      return { box, draw };
    }

    function fillLayers() {
      const n = data.layers[state.kind];
      const option = (l) => element("option", { value: String(l) }, `layer ${l + 1} of ${n}`);
      layer.replaceChildren(...Array.from({ length: n }, (_, l) => option(l)));
      state.layer = Math.min(state.layer, n - 1);
      layer.value = String(state.layer);
    }

    // --- the reader's moves ------------------------------------------------------------------------------------------
    sentence.addEventListener("change", () => {
      state.sentence = Number(sentence.value);
      state.side = "q";
      state.index = 0;
      redraw();
    });
    kind.addEventListener("change", () => {
      state.kind = kind.value;
      head.closest("label").hidden = current().maps[state.kind][0].length === 1; // the GRU has one attention
      fillLayers();
      redraw();
    });
    layer.addEventListener("change", () => {
      state.layer = Number(layer.value);
      redraw();
    });
    head.addEventListener("change", () => {
      state.head = head.value;
      redraw();
    });

    function pick(button) {
      if (!button) return;
      state.side = button.dataset.side;
      state.index = Number(button.dataset.index);
      show();
    }
    for (const row of [queries, keys]) {
      row.addEventListener("focusin", (event) => pick(event.target.closest(".attn-token")));
      row.addEventListener("pointerover", (event) => pick(event.target.closest(".attn-token")));
      row.addEventListener("keydown", (event) => {
        const buttons = [...row.querySelectorAll(".attn-token")];
        const at = buttons.indexOf(event.target.closest(".attn-token"));
        const last = buttons.length - 1;
        const to = { ArrowRight: at + 1, ArrowDown: at + 1, ArrowLeft: at - 1, ArrowUp: at - 1, Home: 0, End: last }[
          event.key
        ];
        if (at < 0 || to === undefined) return;
        event.preventDefault();
        buttons[Math.max(0, Math.min(buttons.length - 1, to))].focus();
      });
    }
    figure.addEventListener("pointerover", (event) => {
      const q = event.target.dataset && event.target.dataset.q;
      if (q !== undefined) pick(queries.querySelectorAll(".attn-token")[Number(q)]);
    });

    kind.value = state.kind;
    fillLayers();
    redraw();
    root.classList.add("attn-ready");
  }

  function start() {
    document.querySelectorAll("div.attn-explorer:not(.attn-ready):not(.attn-failed)").forEach((root) => {
      try {
        build(root, drawn++);
      } catch (error) {
        root.classList.add("attn-failed");
        root.append(element("p", { class: "attn-error" }, `The explorer could not be drawn: ${error}`));
        throw error;
      }
    });
  }
  window.attnExplorer = { start };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
