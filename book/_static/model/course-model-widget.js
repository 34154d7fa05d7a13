/* The "Try the model" box (the book's try page, and chapter 9's evaluation page below the explorer): the reader types
   English, window.courseModel (course-model.js) translates it in this page, and the box shows the BPE pieces, the
   Spanish, and the attention explorer of chapter 9 (explorer.js) for that sentence: greedy's maps of every layer and
   head, and the beam's steps. book/_ext/course_model.py writes the box's element, <div class="course-model">, with
   the limits (data-max-chars) and, on the try page, data-preload (the weights load with the page). */
"use strict";

(() => {
  let made = 0;

  function element(tag, attributes = {}, text = "") {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    if (text) node.textContent = text;
    return node;
  }

  // Weights in [0, 1] -> thousandths, each row without its trailing zeros: the explorer's data (explorer/pages.py)
  const thousandths = (maps) =>
    maps.map((layer) =>
      layer.map((head) =>
        head.map((row) => {
          const out = row.map((w) => Math.round(w * 1000));
          while (out.length && out[out.length - 1] === 0) out.pop();
          return out;
        }),
      ),
    );

  // The explorer's data for one typed sentence, from greedy's and the beam's details (see explorer/pages.py)
  function explorerData(text, greedy, beam) {
    const written = [...greedy.written, "<eos>"];
    const scored = (run, n, ended) =>
      ended ? { log_prob: run.logP, score: run.logP / ((5 + n) / 6) ** greedy.alpha } : {};
    return {
      decimals: 3,
      kinds: { encoder: "encoder self-attention", decoder: "decoder self-attention", cross: "cross-attention" },
      layers: {
        encoder: greedy.maps.encoder.length,
        decoder: greedy.maps.decoder.length,
        cross: greedy.maps.cross.length,
      },
      heads: greedy.maps.encoder[0].length,
      beam_size: beam.beam,
      alpha: beam.alpha,
      sentences: [
        {
          text,
          note: "typed here",
          source: greedy.source,
          written,
          read: ["<bos>", ...written.slice(0, -1)],
          greedy: { text: greedy.output, ...scored(greedy, greedy.tokens.length + 1, greedy.ended) },
          beam: { text: beam.output, log_prob: beam.logP, score: beam.score },
          steps: { steps: beam.steps, stop: beam.stop },
          maps: {
            encoder: thousandths(greedy.maps.encoder),
            decoder: thousandths(greedy.maps.decoder),
            cross: thousandths(greedy.maps.cross),
          },
        },
      ],
    };
  }

  function build(root) {
    const n = made++;
    const id = (name) => `course-model-${n}-${name}`;
    const maxChars = root.dataset.maxChars || "300";
    const form = element("form", { class: "cm-form" });
    const label = element("label", { for: id("text"), class: "cm-label" }, "An English sentence");
    const box = element("textarea", { id: id("text"), class: "cm-text", rows: "2", "aria-describedby": id("hint") });
    box.value = root.dataset.example || "";
    const hint = element(
      "p",
      { id: id("hint"), class: "cm-hint" },
      `Up to ${maxChars} characters. The model learned from short everyday sentences (Tatoeba), and runs in this page.`,
    );
    const search = element("fieldset", { class: "cm-search" });
    search.append(element("legend", {}, "Search"));
    for (const [value, text] of [
      ["1", "greedy"],
      ["4", "beam search, K = 4"],
    ]) {
      const option = element("label", { class: "cm-option" });
      const radio = element("input", { type: "radio", name: id("search"), value, class: `cm-beam-${value}` });
      radio.checked = value === "1";
      option.append(radio, ` ${text}`);
      search.append(option);
    }
    const go = element("button", { type: "submit", class: "cm-go" }, "Translate");
    form.append(label, box, hint, search, go);
    const status = element("p", { class: "cm-status", role: "status", "aria-live": "polite" });
    const result = element("dl", { class: "cm-result" });
    result.hidden = true;
    const explorer = element("div", { class: "cm-explorer" });
    root.replaceChildren(form, status, result, explorer);
    root.classList.add("cm-ready");

    function show(text, answer, k) {
      result.replaceChildren();
      result.append(element("dt", {}, `Its BPE pieces (${answer.source.length})`));
      const pieces = element("dd", { class: "cm-pieces" });
      answer.source.forEach((p) => pieces.append(element("span", { class: "cm-piece" }, p)));
      result.append(pieces);
      if (answer.split.length) {
        const cut = answer.split.map((c) => `\u201c${c}\u201d`).join(", ");
        result.append(element("dt", {}, "Characters with no piece of their own"));
        result.append(
          element(
            "dd",
            { class: "cm-split" },
            `The tokenizer cut ${cut} into raw UTF-8 bytes (the pieces in \u27e8hex\u27e9 above): ` +
              "the model saw few or none of them in training, so expect them to be dropped or mistranslated.",
          ),
        );
      }
      result.append(element("dt", {}, k === 1 ? "Spanish, greedy" : `Spanish, beam search (K = ${k})`));
      result.append(element("dd", { class: "cm-output", lang: "es" }, answer.output));
      result.hidden = false;
    }

    let busy = false;
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (busy) return;
      const text = box.value;
      const k = Number(form.querySelector("input[type=radio]:checked").value);
      busy = true;
      go.setAttribute("aria-disabled", "true");
      status.classList.remove("cm-refused");
      const loaded = Boolean(window.COURSE_MODEL_DATA);
      status.textContent = loaded ? "Translating\u2026" : "Loading the model (13 MB), then translating\u2026";
      try {
        const started = performance.now();
        const first = await window.courseModel.translate(text, { beam: k, details: true });
        const ms = Math.round(performance.now() - started);
        show(text, first, k);
        status.textContent = `Translated in ${ms} ms, in this page. Drawing the attention maps\u2026`;
        const other = await window.courseModel.translate(text, { beam: k === 1 ? 4 : 1, details: true });
        const [greedy, beam] = k === 1 ? [first, other] : [other, first];
        const holder = element("div", { class: "attn-explorer attn-explorer-typed" });
        const json = JSON.stringify(explorerData(text, greedy, beam)).replace(/</g, "\\u003c");
        holder.append(element("script", { type: "application/json", class: "attn-explorer-data" }, json));
        explorer.replaceChildren(holder);
        if (window.attnExplorer) window.attnExplorer.start();
        status.textContent = `Translated in ${ms} ms, in this page. Below: the maps of its greedy translation.`;
      } catch (error) {
        status.classList.add("cm-refused");
        status.textContent = error.refused ? error.message : `The model failed: ${error.message}`;
        if (error.refused) {
          result.hidden = true;
          explorer.replaceChildren();
        }
      } finally {
        busy = false;
        go.removeAttribute("aria-disabled");
      }
    });
    if (root.dataset.preload !== undefined) {
      window.courseModel.ready().then(
        () => root.classList.add("cm-loaded"),
        (error) => (status.textContent = `The model could not be loaded: ${error.message}`),
      );
    }
  }

  function start() {
    document.querySelectorAll("div.course-model:not(.cm-ready)").forEach(build);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
