/* window.courseModel: the course's reference Transformer in this page (course-model-engine.js computes it).

   courseModel.translate(text, {beam: 1 | 4, details}) resolves to {pieces: [...], output: "..."}, as
   `python -m transformer_course.reference translate transformer-ref --beam 4 "TEXT"` prints them; input the model is
   not asked about (nothing typed, too long) rejects with an Error whose `refused` is true and whose message says why.
   The weights (about 13 MB) are a script of their own, transformer-ref-model.js, written by the book build
   (book/_ext/course_model.py): a page opened from file:// may not fetch a file, but it may load a script. They are
   loaded on the first call, or at once where the page asks (a widget with data-preload), and decoded in a Worker made
   from the engine's source text (a Blob URL: a Worker from a file:// URL is refused). Where no Worker can be made,
   the engine runs on the main thread, yielding to the page after every decoder step, so that it never freezes. */
"use strict";

(() => {
  if (window.courseModel) return;
  const here = document.currentScript ? document.currentScript.src : "";
  const weightsUrl = here.replace(/[^/]*$/, "transformer-ref-model.js");
  let ready = null; // the promise of a loaded engine: {call(message) -> promise}
  let queue = Promise.resolve(); // one translation at a time, in order

  function loadWeights() {
    if (window.COURSE_MODEL_DATA) return Promise.resolve(window.COURSE_MODEL_DATA);
    return new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = weightsUrl;
      script.onload = () => resolve(window.COURSE_MODEL_DATA);
      script.onerror = () => reject(new Error(`the model's weights (${weightsUrl}) could not be loaded`));
      document.head.append(script);
    });
  }

  const WORKER = `"use strict";
${courseModelEngine.toString()}
const engine = courseModelEngine();
self.onmessage = async (event) => {
  const { id, type, data, text, options } = event.data;
  try {
    let result;
    if (type === "load") result = await engine.load(data);
    else {
      const steps = engine.translate(text, options);
      let next;
      while (!(next = steps.next()).done);
      result = next.value;
    }
    self.postMessage({ id, result });
  } catch (error) {
    self.postMessage({ id, error: String((error && error.message) || error) });
  }
};`;

  function inWorker() {
    const url = URL.createObjectURL(new Blob([WORKER], { type: "text/javascript" }));
    const worker = new Worker(url);
    const waiting = new Map();
    let next = 0;
    worker.onmessage = ({ data }) => {
      const [resolve, reject] = waiting.get(data.id);
      waiting.delete(data.id);
      if (data.error !== undefined) reject(new Error(data.error));
      else resolve(data.result);
    };
    worker.onerror = (event) => {
      // a Worker the page refuses fails here, after the constructor returned: give up on it
      for (const [, reject] of waiting.values()) reject(new Error(event.message || "the Worker failed"));
      waiting.clear();
    };
    const call = (message) =>
      new Promise((resolve, reject) => {
        waiting.set(next, [resolve, reject]);
        worker.postMessage({ id: next++, ...message });
      });
    return { call, where: "worker" };
  }

  function onMainThread() {
    const engine = courseModelEngine();
    const pause = () => new Promise((resolve) => setTimeout(resolve, 0));
    async function call({ type, data, text, options }) {
      if (type === "load") return engine.load(data);
      const steps = engine.translate(text, options);
      let started = performance.now();
      for (;;) {
        const next = steps.next();
        if (next.done) return next.value;
        if (performance.now() - started > 30) {
          await pause(); // let the page draw and answer the reader between steps
          started = performance.now();
        }
      }
    }
    return { call, where: "main thread" };
  }

  async function start() {
    const data = await loadWeights();
    let engine;
    try {
      engine = inWorker();
      await engine.call({ type: "load", data });
    } catch (error) {
      console.info(`course model: no Worker here (${error}); computing on the main thread`);
      engine = onMainThread();
      await engine.call({ type: "load", data });
    }
    courseModel.where = engine.where;
    return engine;
  }

  const courseModel = {
    where: null, // "worker" or "main thread", once loaded
    ready() {
      if (!ready) ready = start();
      return ready;
    },
    translate(text, options = {}) {
      const job = queue.then(async () => {
        const engine = await courseModel.ready();
        const result = await engine.call({ type: "translate", text, options: { beam: 1, ...options } });
        if (result.refused) {
          const error = new Error(result.refused);
          error.refused = true;
          error.pieces = result.pieces;
          throw error;
        }
        return result;
      });
      queue = job.catch(() => {});
      return job;
    },
  };
  window.courseModel = courseModel;
})();
