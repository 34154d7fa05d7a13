/* The course's reference Transformer, computed by hand in JavaScript: the book's "Try the model" page runs it in the
   reader's browser, from file://, offline. One function, courseModelEngine(), with no DOM in it: the page runs it in
   a Worker made from its own source text (Function.prototype.toString into a Blob URL; a Worker from a file:// URL
   is refused), or on the main thread, a decoder step at a time, where a Worker cannot be made.

   It mirrors the Python side step for step, so that tests/test_browser_model.py can ask for the same tokens:
   - the tokenizer: src/transformer_course/data/tokenize.py (Hugging Face's byte-level BPE: GPT-2's pre-tokenizer
     regex, the 256 byte characters, merges applied lowest rank first, leftmost on a tie);
   - the model: models/transformer.py with norm_first=True (pre-norm), a final LayerNorm on each stack, the
     embedding tied to the output layer, embeddings x sqrt(d_model) + the sinusoidal table (positional.py);
   - decoding: decoding/search.py's greedy_decode (argmax of the logits) and _beam_search for one sentence
     (rank_candidates' best 2K, split_candidates, normalised_score with lp(n) = ((5 + n) / 6) ** alpha).
   Weights arrive as float16 (reference/browser.py writes them); every product is summed in float64 and every
   stored activation is float32, as PyTorch's float32 tensors are. Shapes: T source pieces, t tokens so far,
   d = d_model (256), h heads (4), d_k = d / h, V vocabulary (8000), R decoder rows (1, or K beams). */
"use strict";

function courseModelEngine() {
  const EOS = 2;
  let cfg = null; // the model's configuration (reference/browser.py: model.config)
  let W = null; // tensor name -> Float32Array (a view of one buffer), rows of nn.Linear weights: (out, in)
  let tok = null; // the tokenizer's tables
  let pe = null; // (max_len, d) the sinusoidal table, in float32 as positional.py casts it
  let limits = null; // max_chars, max_pieces, alpha: reference/browser.py's, which its CLI applies too

  // --- the weights: base64 -> zlib -> two byte planes of float16 -> float32 -------------------------------------
  async function inflate(base64) {
    const binary = atob(base64);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  function halfTable() {
    // every float16 bit pattern's value (sign, 5 exponent bits, 10 mantissa bits)
    const table = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) {
      const sign = h & 0x8000 ? -1 : 1;
      const e = (h >> 10) & 31;
      const m = h & 1023;
      if (e === 0) table[h] = sign * m * 2 ** -24;
      else if (e === 31) table[h] = m ? NaN : sign * Infinity;
      else table[h] = sign * (1 + m / 1024) * 2 ** (e - 15);
    }
    return table;
  }

  async function load(data) {
    cfg = data.config;
    limits = { max_chars: data.max_chars, max_pieces: data.max_pieces, alpha: data.alpha };
    const planes = await inflate(data.blob); // (2 n,): n high bytes, then n low bytes
    const n = data.count;
    if (planes.length !== 2 * n) throw new Error(`the weights hold ${planes.length} bytes, expected ${2 * n}`);
    const table = halfTable();
    const all = new Float32Array(n);
    for (let i = 0; i < n; i++) all[i] = table[(planes[i] << 8) | planes[n + i]];
    W = {};
    for (const [name, [offset, shape]] of Object.entries(data.tensors)) {
      W[name] = all.subarray(offset, offset + shape.reduce((a, b) => a * b, 1));
    }
    if (!cfg.norm_first) throw new Error("this engine computes pre-norm Transformers (norm_first) only");
    // tied embeddings are stored once, under the name the state dict gives first
    W["src_embed.weight"] ??= W["tgt_embed.weight"];
    W["out.weight"] ??= W["tgt_embed.weight"];
    tok = tokenizer(data);
    const d = cfg.d_model;
    pe = new Float32Array(cfg.max_len * d);
    for (let pos = 0; pos < cfg.max_len; pos++) {
      for (let i = 0; i < d; i += 2) {
        const angle = pos * 10000 ** (-i / d); // computed in float64, as frequencies() does
        pe[pos * d + i] = Math.sin(angle);
        pe[pos * d + i + 1] = Math.cos(angle);
      }
    }
    return { parameters: n, vocab: data.vocab.length };
  }

  // --- the tokenizer -----------------------------------------------------------------------------------------------
  function tokenizer(data) {
    // GPT-2's byte -> printable character map (bpe.py's BYTE_TO_CHAR): a space is 'Ġ' (U+0120)
    const byteToChar = new Array(256);
    const keeps = [];
    for (let b = 33; b <= 126; b++) keeps.push(b);
    for (let b = 161; b <= 172; b++) keeps.push(b);
    for (let b = 174; b <= 255; b++) keeps.push(b);
    let extra = 0;
    for (let b = 0; b < 256; b++) byteToChar[b] = String.fromCharCode(keeps.includes(b) ? b : 256 + extra++);
    const charToByte = new Map(byteToChar.map((c, b) => [c, b]));
    const ids = new Map(data.vocab.map((t, i) => [t, i]));
    const V = data.vocab.length;
    const rank = new Map(); // left id * V + right id -> rank; merged[rank] = the new token's id
    const merged = [];
    data.merges.forEach((m, r) => {
      const [a, b] = m.split(" ");
      rank.set(ids.get(a) * V + ids.get(b), r);
      merged.push(ids.get(a + b));
    });
    const specials = new Set(data.specials);
    const escaped = data.specials.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    const specialSplit = new RegExp(`(${escaped.join("|")})`); // typed "<eos>" is that token, as in tokenizers
    // GPT-2's pre-tokenizer (tokenizers' ByteLevel, Oniguruma): \s as Unicode's White_Space, which is JavaScript's
    // \s without U+FEFF; \p{L}, \p{N} as Unicode's (tests/test_browser_model.py checks every code point).
    const S = "\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
    const word = new RegExp(
      `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${S}\\p{L}\\p{N}]+|[${S}]+(?![^${S}])|[${S}]+`,
      "gu",
    );
    const encoder = new TextEncoder();
    const cache = new Map();

    function encodeWord(w) {
      // one pre-tokenized word (byte characters) -> ids: merge the adjacent pair of lowest rank, leftmost on a tie
      if (cache.has(w)) return cache.get(w);
      const out = Array.from(w, (c) => ids.get(c));
      while (out.length > 1) {
        let best = Infinity;
        let at = -1;
        for (let i = 0; i < out.length - 1; i++) {
          const r = rank.get(out[i] * V + out[i + 1]);
          if (r !== undefined && r < best) [best, at] = [r, i];
        }
        if (at < 0) break;
        out.splice(at, 2, merged[best]);
      }
      cache.set(w, out);
      return out;
    }

    function preTokenize(text) {
      // the words of text, each in byte characters
      return (text.match(word) || []).map((w) => Array.from(encoder.encode(w), (b) => byteToChar[b]).join(""));
    }

    function encode(text) {
      const out = [];
      for (const part of text.split(specialSplit)) {
        if (specials.has(part)) out.push(ids.get(part));
        else for (const w of preTokenize(part)) out.push(...encodeWord(w));
      }
      return out;
    }

    const utf8 = new TextDecoder("utf-8"); // invalid bytes -> U+FFFD, as Rust's from_utf8_lossy in tokenizers
    function decode(tokens) {
      // BPETokenizer.decode: up to the first <eos>, <pad> and <bos> dropped
      const bytes = [];
      for (const t of tokens) {
        if (t === EOS) break;
        if (t === 0 || t === 1) continue;
        const piece = data.vocab[t];
        if (specials.has(piece)) bytes.push(...encoder.encode(piece));
        else for (const c of piece) bytes.push(charToByte.get(c));
      }
      return utf8.decode(new Uint8Array(bytes));
    }
    function bytesOf(t) {
      const piece = data.vocab[t];
      return specials.has(piece) ? Array.from(encoder.encode(piece)) : Array.from(piece, (c) => charToByte.get(c));
    }
    const strict = new TextDecoder("utf-8", { fatal: true });
    function readable(t) {
      // a piece as the page shows it: its text with a space as '_' (the explorer's way), or, for a piece that holds
      // part of a character only, its bytes in hex
      if (t === EOS) return "<eos>";
      const bytes = bytesOf(t);
      try {
        return strict.decode(new Uint8Array(bytes)).replace(/ /g, "_");
      } catch {
        return `\u27e8${bytes.map((b) => b.toString(16).padStart(2, "0")).join(" ")}\u27e9`;
      }
    }
    function splitCharacters(text, ids) {
      // the characters the vocabulary has no piece for: their UTF-8 bytes fall in more than one piece
      const ends = new Set();
      let at = 0;
      for (const t of ids) ends.add((at += bytesOf(t).length));
      const out = new Set();
      at = 0;
      for (const ch of text) {
        const n = encoder.encode(ch).length;
        for (let i = at + 1; i < at + n; i++) if (ends.has(i)) out.add(ch);
        at += n;
      }
      return [...out];
    }
    return { encode, decode, preTokenize, readable, splitCharacters, vocab: data.vocab };
  }

  // --- the layers --------------------------------------------------------------------------------------------------
  // x (rows, n_in) -> (rows, n_out) = x W^T + b, W (n_out, n_in) as nn.Linear stores it; rowStart picks a block of
  // W's rows (the cross-attention's queries are rows 0 .. d - 1 of w_qkv, its keys and values rows d .. 3d - 1).
  // The hot loop of the model: each weight is read once for up to four rows of x (the beams), and n_in is a
  // multiple of 4 (256 or 1024).
  function linear(x, rows, nIn, w, b, nOut, rowStart = 0) {
    const y = new Float32Array(rows * nOut);
    if (rows === 1) return linearOne(x, nIn, w, b, nOut, rowStart, y);
    for (let r = 0; r < rows; r += 4) {
      const n = Math.min(4, rows - r);
      const x0 = r * nIn;
      const x1 = n > 1 ? x0 + nIn : x0; // fewer than 4 rows: the last one is computed again, and not stored
      const x2 = n > 2 ? x0 + 2 * nIn : x1;
      const x3 = n > 3 ? x0 + 3 * nIn : x2;
      for (let o = 0; o < nOut; o++) {
        const wo = (rowStart + o) * nIn;
        let a0 = 0;
        let a1 = 0;
        let a2 = 0;
        let a3 = 0;
        for (let i = 0; i < nIn; i++) {
          const wi = w[wo + i];
          a0 += x[x0 + i] * wi;
          a1 += x[x1 + i] * wi;
          a2 += x[x2 + i] * wi;
          a3 += x[x3 + i] * wi;
        }
        const bias = b[rowStart + o];
        y[r * nOut + o] = a0 + bias;
        if (n > 1) y[(r + 1) * nOut + o] = a1 + bias;
        if (n > 2) y[(r + 2) * nOut + o] = a2 + bias;
        if (n > 3) y[(r + 3) * nOut + o] = a3 + bias;
      }
    }
    return y;
  }

  function linearOne(x, nIn, w, b, nOut, rowStart, y) {
    // one row (greedy decoding, the beam's first step): four partial sums, for the processor's pipelines
    for (let o = 0; o < nOut; o++) {
      const wo = (rowStart + o) * nIn;
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      for (let i = 0; i < nIn; i += 4) {
        s0 += x[i] * w[wo + i];
        s1 += x[i + 1] * w[wo + i + 1];
        s2 += x[i + 2] * w[wo + i + 2];
        s3 += x[i + 3] * w[wo + i + 3];
      }
      y[o] = s0 + s1 + s2 + s3 + b[rowStart + o];
    }
    return y;
  }

  function layerNorm(x, rows, d, g, b) {
    // nn.LayerNorm(d), eps 1e-5, biased variance
    const y = new Float32Array(rows * d);
    for (let r = 0; r < rows; r++) {
      let mean = 0;
      for (let i = 0; i < d; i++) mean += x[r * d + i];
      mean /= d;
      let v = 0;
      for (let i = 0; i < d; i++) v += (x[r * d + i] - mean) ** 2;
      const inv = 1 / Math.sqrt(v / d + 1e-5);
      for (let i = 0; i < d; i++) y[r * d + i] = (x[r * d + i] - mean) * inv * g[i] + b[i];
    }
    return y;
  }

  function addInto(x, y) {
    for (let i = 0; i < x.length; i++) x[i] += y[i];
  }

  function feedForward(x, rows, p) {
    // Linear(d, d_ff), ReLU, Linear(d_ff, d)
    const d = cfg.d_model;
    const f = cfg.d_ff;
    const hidden = linear(x, rows, d, W[`${p}.ff.linear1.weight`], W[`${p}.ff.linear1.bias`], f);
    for (let i = 0; i < hidden.length; i++) if (hidden[i] < 0) hidden[i] = 0;
    return linear(hidden, rows, f, W[`${p}.ff.linear2.weight`], W[`${p}.ff.linear2.bias`], d);
  }

  // One head's attention for one query: q at qOff of q (d_k values), keys/values rows 0 .. n - 1 of k and v, each
  // row `stride` wide with this head's d_k values at `col`; writes the output at out[outOff ..] and returns the
  // weights (n,) as float32, as softmax((q k^T) / sqrt(d_k)) gives them.
  function attendOne(q, qOff, k, v, n, stride, col, out, outOff) {
    const dk = cfg.d_model / cfg.n_heads;
    const scale = 1 / Math.sqrt(dk);
    const scores = new Float64Array(n);
    let max = -Infinity;
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let i = 0; i < dk; i++) s += q[qOff + i] * k[j * stride + col + i];
      scores[j] = Math.fround(Math.fround(s) * scale);
      if (scores[j] > max) max = scores[j];
    }
    let sum = 0;
    for (let j = 0; j < n; j++) sum += scores[j] = Math.exp(scores[j] - max);
    const weights = new Float32Array(n);
    for (let j = 0; j < n; j++) weights[j] = scores[j] / sum;
    for (let i = 0; i < dk; i++) {
      let s = 0;
      for (let j = 0; j < n; j++) s += weights[j] * v[j * stride + col + i];
      out[outOff + i] = s;
    }
    return weights;
  }

  function embed(ids, positions, table) {
    // (rows, d): embedding x sqrt(d), then the position's sinusoid (in float32, each sum rounded as torch's)
    const d = cfg.d_model;
    const e = W[table];
    const x = new Float32Array(ids.length * d);
    const root = Math.sqrt(d);
    for (let r = 0; r < ids.length; r++) {
      for (let i = 0; i < d; i++) x[r * d + i] = Math.fround(e[ids[r] * d + i] * root) + pe[positions[r] * d + i];
    }
    return x;
  }

  // --- the encoder: ids (T,) -> memory (T, d), and its self-attention maps [layer][head][query] = weights (T,) ---
  function encode(ids) {
    const d = cfg.d_model;
    const h = cfg.n_heads;
    const dk = d / h;
    const T = ids.length;
    const x = embed(ids, ids.map((_, i) => i), "src_embed.weight");
    const maps = [];
    for (let l = 0; l < cfg.n_encoder_layers; l++) {
      const p = `encoder.layers.${l}`;
      const n = layerNorm(x, T, d, W[`${p}.self_attn_norm.weight`], W[`${p}.self_attn_norm.bias`]);
      const qkv = linear(n, T, d, W[`${p}.self_attn.w_qkv.weight`], W[`${p}.self_attn.w_qkv.bias`], 3 * d); // (T, 3d)
      const heads = new Float32Array(T * d);
      const layerMaps = [];
      for (let head = 0; head < h; head++) {
        const rows = [];
        for (let t = 0; t < T; t++) {
          // keys at columns d + head d_k, values at 2d + head d_k, of the same (T, 3d) rows
          const kv = qkv.subarray(d);
          const vv = qkv.subarray(2 * d);
          rows.push(attendOne(qkv, t * 3 * d + head * dk, kv, vv, T, 3 * d, head * dk, heads, t * d + head * dk));
        }
        layerMaps.push(rows);
      }
      maps.push(layerMaps);
      addInto(x, linear(heads, T, d, W[`${p}.self_attn.w_o.weight`], W[`${p}.self_attn.w_o.bias`], d));
      const m = layerNorm(x, T, d, W[`${p}.ff_norm.weight`], W[`${p}.ff_norm.bias`]);
      addInto(x, feedForward(m, T, p));
    }
    const plain = maps.map((layer) => layer.map((rows) => rows.map((row) => Array.from(row))));
    return { memory: layerNorm(x, T, d, W["encoder.norm.weight"], W["encoder.norm.bias"]), maps: plain };
  }

  // --- the decoder, one position per step, with incremental.py's cache -------------------------------------------
  // The cache: per layer, the self-attention keys and values of every row, (R, max positions, d); the cross-attention
  // keys and values, (T, 2d) per layer, projected once (one sentence: every row shares them).
  function startDecoding(memory, T, room) {
    const d = cfg.d_model;
    const cross = [];
    for (let l = 0; l < cfg.n_decoder_layers; l++) {
      const p = `decoder.layers.${l}.cross_attn`;
      cross.push(linear(memory, T, d, W[`${p}.w_qkv.weight`], W[`${p}.w_qkv.bias`], 2 * d, d)); // (T, 2d): K | V
    }
    return { T, room, cross, selfKV: [], length: 0 };
  }

  function reorder(cache, rows) {
    // keep rows `rows` in that order (beams follow the hypotheses they extend): incremental.DecoderCache.reorder
    cache.selfKV = cache.selfKV.map((layer) => rows.map((r) => layer[r].slice()));
  }

  // tokens (R,) at position cache.length -> logits (R, V); with `record`, each layer's self and cross weights
  function decoderStep(cache, tokens, record) {
    const d = cfg.d_model;
    const h = cfg.n_heads;
    const dk = d / h;
    const R = tokens.length;
    const pos = cache.length;
    const y = embed(tokens, tokens.map(() => pos), "tgt_embed.weight");
    const seen = { decoder: [], cross: [] };
    for (let l = 0; l < cfg.n_decoder_layers; l++) {
      const p = `decoder.layers.${l}`;
      if (!cache.selfKV[l]) cache.selfKV[l] = tokens.map(() => new Float32Array(cache.room * 2 * d));
      const n = layerNorm(y, R, d, W[`${p}.self_attn_norm.weight`], W[`${p}.self_attn_norm.bias`]);
      const qkv = linear(n, R, d, W[`${p}.self_attn.w_qkv.weight`], W[`${p}.self_attn.w_qkv.bias`], 3 * d);
      const heads = new Float32Array(R * d);
      const selfMaps = [];
      for (let r = 0; r < R; r++) {
        const kv = cache.selfKV[l][r]; // (room, 2d): K | V of positions 0 .. pos
        kv.set(qkv.subarray(r * 3 * d + d, r * 3 * d + 3 * d), pos * 2 * d);
        for (let head = 0; head < h; head++) {
          const at = head * dk;
          const w = attendOne(qkv, r * 3 * d + at, kv, kv.subarray(d), pos + 1, 2 * d, at, heads, r * d + at);
          if (r === 0) selfMaps.push(w);
        }
      }
      addInto(y, linear(heads, R, d, W[`${p}.self_attn.w_o.weight`], W[`${p}.self_attn.w_o.bias`], d));
      const c = layerNorm(y, R, d, W[`${p}.cross_attn_norm.weight`], W[`${p}.cross_attn_norm.bias`]);
      const q = linear(c, R, d, W[`${p}.cross_attn.w_qkv.weight`], W[`${p}.cross_attn.w_qkv.bias`], d); // rows 0..d-1
      const crossHeads = new Float32Array(R * d);
      const crossMaps = [];
      const kv = cache.cross[l];
      for (let r = 0; r < R; r++) {
        for (let head = 0; head < h; head++) {
          const at = head * dk;
          const w = attendOne(q, r * d + at, kv, kv.subarray(d), cache.T, 2 * d, at, crossHeads, r * d + at);
          if (r === 0) crossMaps.push(w);
        }
      }
      addInto(y, linear(crossHeads, R, d, W[`${p}.cross_attn.w_o.weight`], W[`${p}.cross_attn.w_o.bias`], d));
      const m = layerNorm(y, R, d, W[`${p}.ff_norm.weight`], W[`${p}.ff_norm.bias`]);
      addInto(y, feedForward(m, R, p));
      if (record) {
        seen.decoder.push(selfMaps);
        seen.cross.push(crossMaps);
      }
    }
    cache.length += 1;
    const out = layerNorm(y, R, d, W["decoder.norm.weight"], W["decoder.norm.bias"]);
    return { logits: linear(out, R, d, W["out.weight"], W["out.bias"], cfg.tgt_vocab), seen };
  }

  function logSoftmax(logits, r, V) {
    // (V,) float32 log-probabilities of row r, as F.log_softmax
    let max = -Infinity;
    for (let v = 0; v < V; v++) if (logits[r * V + v] > max) max = logits[r * V + v];
    let sum = 0;
    for (let v = 0; v < V; v++) sum += Math.exp(logits[r * V + v] - max);
    const lse = max + Math.log(sum);
    const out = new Float32Array(V);
    for (let v = 0; v < V; v++) out[v] = logits[r * V + v] - lse;
    return out;
  }

  const maxOutputLength = (n) => Math.floor(1.5 * n) + 10; // search.max_output_length

  // Greedy decoding (incremental.greedy_decode for one sentence), a generator: it yields after every step. Returns
  // the tokens without <eos>, log P of what it wrote, and every attention map (attention_maps' layout).
  function* greedy(ids) {
    const { memory, maps } = encode(ids);
    const limit = maxOutputLength(ids.length);
    const cache = startDecoding(memory, ids.length, limit + 1); // + 1: the row that reads a last token, below
    const V = cfg.tgt_vocab;
    const out = [];
    const decoderMaps = [];
    const crossMaps = [];
    let token = cfg.bos_id;
    let logP = 0;
    for (let step = 0; step < limit; step++) {
      const { logits, seen } = decoderStep(cache, [token], true);
      let best = 0;
      for (let v = 1; v < V; v++) if (logits[v] > logits[best]) best = v;
      logP += logSoftmax(logits, 0, V)[best];
      decoderMaps.push(seen.decoder); // [step][layer][head] = weights (step + 1,)
      crossMaps.push(seen.cross);
      token = best;
      if (token === EOS) break;
      out.push(token);
      yield step;
    }
    const ended = token === EOS;
    if (!ended) {
      // cut by the length limit: attention_maps' decoder input <bos> + out has one more row, the one reading the
      // last token written
      const { seen } = decoderStep(cache, [token], true);
      decoderMaps.push(seen.decoder);
      crossMaps.push(seen.cross);
    }
    // [step][layer][head] -> [layer][head][step]
    const byLayer = (steps) =>
      steps[0].map((_, l) => steps[0][l].map((_, hd) => steps.map((s) => Array.from(s[l][hd]))));
    const all = { encoder: maps, decoder: byLayer(decoderMaps), cross: byLayer(crossMaps) };
    return { tokens: out, logP, ended, maps: all };
  }

  // Beam search (search._beam_search for one sentence: K rows, the best 2K of the K V continuations, those among
  // the best K that end in <eos> finish, the best K others live on), a generator that yields after every step.
  // Returns the best finished hypothesis, every finished one, and the steps as the explorer draws them.
  function* beam(ids, k, alpha) {
    const { memory } = encode(ids);
    const limit = maxOutputLength(ids.length);
    const cache = startDecoding(memory, ids.length, limit);
    const V = cfg.tgt_vocab;
    let scores = [0]; // float32 log P of the live hypotheses: only beam 0 lives at the start (the others are -inf)
    let prefixes = [[]];
    let tokens = [cfg.bos_id];
    const finished = []; // [score, tokens]
    const steps = [];
    let stop = "limit";
    for (let step = 1; step <= limit; step++) {
      const { logits } = decoderStep(cache, tokens, false);
      // the best 2K candidates, (score, beam b, token v), best first; a tie goes to the lower index b V + v
      const top = [];
      for (let b = 0; b < scores.length; b++) {
        const logp = logSoftmax(logits, b, V);
        for (let v = 0; v < V; v++) {
          const s = Math.fround(scores[b] + logp[v]);
          if (top.length === 2 * k && s <= top[top.length - 1][0]) continue;
          let at = top.length;
          while (at > 0 && top[at - 1][0] < s) at--;
          top.splice(at, 0, [s, b, v]);
          if (top.length > 2 * k) top.pop();
        }
      }
      const last = step === limit;
      const record = { live: [], done: [] };
      top.slice(0, k).forEach(([s, b, v]) => {
        if (!Number.isFinite(s) || !(v === EOS || last)) return;
        const score = s / ((5 + step) / 6) ** alpha;
        finished.push([score, v === EOS ? prefixes[b] : [...prefixes[b], v], s]);
        record.done.push([b, v, s, score]);
      });
      // a stable sort by "ends in <eos>": the first K that do not, in rank order
      const order = [...top.filter((c) => c[2] !== EOS), ...top.filter((c) => c[2] === EOS)].slice(0, k);
      for (const [s, b, v] of order) if (Number.isFinite(s) && v !== EOS) record.live.push([b, v, s]);
      steps.push(record);
      if (last) break;
      if (finished.length >= k) {
        stop = "beam";
        break;
      }
      reorder(cache, order.map((c) => c[1]));
      prefixes = order.map(([, b, v]) => [...prefixes[b], v]);
      scores = order.map((c) => c[0]);
      tokens = order.map((c) => c[2]);
      yield step;
    }
    finished.sort((a, b) => b[0] - a[0]); // stable: ties keep the order in which they finished
    if (stop === "limit") steps[steps.length - 1].live = [];
    const [score, best, logP] = finished[0];
    return { tokens: best, score, logP, finished, steps, stop };
  }

  const blank = /^[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/u; // White_Space only
  // Why a text is not translated: the same checks and words as reference/browser.py's check_input.
  function check(text) {
    if (typeof text !== "string") throw new TypeError("the text must be a string");
    if (blank.test(text)) return { refused: "Nothing to translate: type an English sentence." };
    const chars = [...text].length;
    if (chars > limits.max_chars) {
      return { refused: `Too long: ${chars} characters, the limit is ${limits.max_chars}.` };
    }
    const ids = tok.encode(text);
    if (ids.length > limits.max_pieces) {
      return { refused: `Too long: ${ids.length} BPE pieces, the limit is ${limits.max_pieces}.`, ids };
    }
    return { ids };
  }

  // The page's contract, a generator (it yields after every decoder step): {pieces, output}, the input's pieces as
  // the vocabulary spells them and the decoded Spanish; with `details`, the ids, the output's tokens, and greedy's
  // maps or the beam's steps. Input the model is not asked about: {refused: why, pieces (when it was cut)}.
  function* translate(text, options = {}) {
    const k = options.beam === undefined ? 1 : options.beam;
    if (k !== 1 && k !== 4) throw new Error(`beam must be 1 (greedy) or 4 (chapter 9's beam search), got ${k}`);
    const c = check(text);
    const pieces = c.ids ? c.ids.map((i) => tok.vocab[i]) : [];
    if (c.refused) return { refused: c.refused, pieces };
    const run = k === 1 ? yield* greedy(c.ids) : yield* beam(c.ids, k, limits.alpha);
    const result = { pieces, output: tok.decode(run.tokens) };
    if (options.details) {
      // what the page shows besides: readable pieces, the characters cut into bytes, the beam's steps as pieces
      Object.assign(result, { ids: c.ids, beam: k, alpha: limits.alpha }, run);
      result.source = c.ids.map(tok.readable);
      result.written = run.tokens.map(tok.readable);
      result.split = tok.splitCharacters(text, c.ids);
      if (run.steps) {
        result.steps = run.steps.map(({ live, done }) => ({
          live: live.map(([b, v, p]) => [b, tok.readable(v), p]),
          done: done.map(([b, v, p, q]) => [b, tok.readable(v), p, q]),
        }));
      }
    }
    return result;
  }

  return {
    load,
    check,
    translate,
    greedy,
    beam,
    encode: (text) => tok.encode(text),
    decode: (tokens) => tok.decode(tokens),
    preTokenize: (text) => tok.preTokenize(text),
    vocab: () => tok.vocab,
  };
}
