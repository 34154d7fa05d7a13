/* The course's reading aids, on top of sphinx-book-theme 1.1.4 (loaded by book/_ext/course_book.py on every page).
   Small and plain: each part below is one fix, with why. tests/test_browser.py checks each in Chromium. */
"use strict";

(() => {
  const PHONE = 600; // px: below this width a figure may scroll inside its own box instead of shrinking
  // How much a figure may be shrunk on a phone: a diagram (SVG, labels of 8 to 13 px) not at all, a plot (PNG,
  // tick labels of 10 to 14 px at 100 dpi) to 80 %: their labels stay readable.
  const MAX_SHRINK = { svg: 1.0, other: 1.25 };
  // A display equation wider than a phone's column is drawn at down to 80 % of its size (its symbols stay about as
  // large as the text around it); one still wider scrolls inside its own box (course.css).
  const LEAST_MATH = 0.8;

  // 1. The sidebar's chevrons (<summary> of a chapter with sections) had no accessible name: a screen reader
  //    announced an unnamed control. Name each after the chapter it opens.
  function nameChevrons() {
    for (const summary of document.querySelectorAll("nav details > summary")) {
      if (summary.getAttribute("aria-label") || summary.textContent.trim()) continue;
      const link = summary.parentElement.parentElement.querySelector(":scope > a");
      const title = link ? link.textContent.trim() : "this chapter";
      summary.setAttribute("aria-label", `Show or hide the sections of ${title}`);
    }
  }

  // 2. The search button shows "Search Ctrl+K" but was labelled "Search": its accessible name must contain what
  //    it shows (WCAG 2.5.3, label in name). Below 960 px the theme shows its icon alone: named "Search" then.
  function labelSearchButton() {
    for (const button of document.querySelectorAll("button.search-button-field")) {
      const parts = [...button.children].filter((e) => getComputedStyle(e).display !== "none");
      const shown = parts.map((e) => e.textContent).join(" ").replace(/\s+/g, " ").trim();
      const name = button.querySelector(".search-button__default-text")?.textContent.trim();
      button.setAttribute("aria-label", shown || name || "Search");
    }
  }

  // 3. On a phone, the drawers (the chapters on the left, this page's sections on the right) stayed open over the
  //    page after a link in them was tapped: close the drawer once its link has been followed.
  function closeDrawersOnTap() {
    for (const [drawer, box] of [
      [".bd-sidebar-primary", "pst-primary-sidebar-checkbox"],
      [".bd-sidebar-secondary", "pst-secondary-sidebar-checkbox"],
    ]) {
      const checkbox = document.getElementById(box);
      const panel = document.querySelector(drawer);
      if (!checkbox || !panel) continue;
      panel.addEventListener("click", (event) => {
        if (event.target.closest("a[href]")) checkbox.checked = false;
      });
    }
  }

  // 4. On a phone a wide figure was shrunk until its labels could not be read (2.5 times for some, labels of 6 px):
  //    show it at no less than 1 / MAX_SHRINK of its size, and let it scroll sideways inside its own box.
  function fitFigures() {
    const phone = window.innerWidth < PHONE;
    for (const img of document.querySelectorAll("div.cell_output img, div.output img")) {
      if (!img.naturalWidth) continue;
      const box = img.parentElement;
      // a plot's copy for the other width (course.css shows one of the two) takes no part
      if (!phone || getComputedStyle(img).display === "none") {
        img.style.removeProperty("width");
        img.style.removeProperty("max-width");
        box.classList.remove("course-scroll");
        box.removeAttribute("tabindex");
        continue;
      }
      const column = box.getBoundingClientRect().width || img.getBoundingClientRect().width;
      const svg = /\.svg(\?|$)/.test(img.getAttribute("src") || "");
      const least = img.naturalWidth / (svg ? MAX_SHRINK.svg : MAX_SHRINK.other);
      if (column < least) {
        img.style.maxWidth = "none";
        img.style.width = `${Math.ceil(least)}px`;
        box.classList.add("course-scroll");
        box.tabIndex = 0; // a box that scrolls must be reachable with the keyboard (its arrow keys scroll it)
      }
    }
  }

  // 5. On a phone, display equations wider than the column are drawn smaller, down to LEAST_MATH of their size, so
  //    that (the book's long equations being stacked over lines where they are written) the whole fits on screen.
  function fitEquations() {
    const phone = window.innerWidth < PHONE;
    for (const math of document.querySelectorAll('mjx-container[display="true"]')) {
      const svg = math.querySelector("svg");
      if (!svg) continue;
      if (math.dataset.courseFontSize) math.style.fontSize = math.dataset.courseFontSize;
      else math.dataset.courseFontSize = math.style.fontSize || "";
      if (!phone) continue;
      const width = svg.getBoundingClientRect().width;
      if (width > math.clientWidth) {
        const size = parseFloat(getComputedStyle(math).fontSize);
        math.style.fontSize = `${size * Math.max(LEAST_MATH, math.clientWidth / width)}px`;
      }
    }
  }

  // 6. A table wider than a phone scrolls inside the theme's own box (course.css), which the theme does not make
  //    focusable as it does code blocks: a keyboard could not scroll it. Make each such box focusable, and named.
  function focusableTables() {
    for (const box of document.querySelectorAll(".pst-scrollable-table-container")) {
      if (box.scrollWidth > box.clientWidth + 1) {
        box.tabIndex = 0;
        box.setAttribute("role", "region");
        box.setAttribute("aria-label", "table, scrolls sideways");
      } else {
        box.removeAttribute("tabindex");
        box.removeAttribute("role");
        box.removeAttribute("aria-label");
      }
    }
  }

  // 6b. A table printed as text (columns aligned with spaces) wrapped on a phone into lines no one could read
  //     across. Such an output keeps its lines and scrolls sideways as a whole inside its box (course.css), which
  //     the keyboard can reach. A text output is a table when most of its (three or more) lines have a gap of two
  //     spaces or more between words.
  const TABLE_LABEL = "printed table, scrolls sideways";
  function printedTables() {
    const phone = window.innerWidth < PHONE;
    for (const pre of document.querySelectorAll("div.cell_output pre")) {
      const lines = pre.textContent.split("\n").filter((line) => line.trim());
      const aligned = lines.filter((line) => /\S {2,}\S/.test(line)).length;
      const table = lines.length >= 3 && aligned * 2 >= lines.length;
      pre.classList.toggle("course-table-text", phone && table);
      if (phone && table && pre.scrollWidth > pre.clientWidth + 1) {
        pre.tabIndex = 0;
        pre.setAttribute("aria-label", TABLE_LABEL);
      } else if (pre.getAttribute("aria-label") === TABLE_LABEL) {
        pre.removeAttribute("aria-label"); // the label this function gave it, once the table no longer scrolls
      }
    }
  }

  // 7. From a file (the README's _build/html/index.html), the search page fetched each result's page for its
  //    summary, which browsers refuse for file:// URLs ("Failed to fetch", no summaries). There, answer those
  //    requests from course-search-text.js, the pages' text that the book's build writes (course_book.py).
  function searchFromFile() {
    if (window.location.protocol !== "file:" || !window.location.pathname.endsWith("/search.html")) return;
    const original = window.fetch.bind(window);
    const root = new URL(document.documentElement.dataset.content_root || "./", window.location.href);
    let texts = null;
    const load = () =>
      texts ||
      (texts = new Promise((resolve, reject) => {
        const script = document.createElement("script");
        script.src = new URL("_static/course-search-text.js", root).href;
        script.onload = () => resolve(window.COURSE_PAGE_TEXT || {});
        script.onerror = reject;
        document.head.appendChild(script);
      }));
    window.fetch = async (resource, options) => {
      const url = new URL(typeof resource === "string" ? resource : resource.url, window.location.href);
      if (url.protocol !== "file:" || !url.href.startsWith(root.href)) return original(resource, options);
      const page = decodeURI(url.pathname.slice(new URL(root.href).pathname.length));
      const text = (await load())[page];
      if (text === undefined) return original(resource, options);
      const main = document.createElement("div");
      main.setAttribute("role", "main");
      main.textContent = text; // escaped: the search parses this as HTML
      return new Response(main.outerHTML, { headers: { "Content-Type": "text/html" } });
    };
  }

  // 8. The search page's summaries began with the theme's chrome: Sphinx quotes the text of the whole main element,
  //    which holds the download buttons and the printed "Contents" before the article (".ipynb .pdf Positional
  //    encoding Contents Setup ..."). Quote the article's text alone (course-search-text.js holds the same, from a
  //    file), or the section that a hit names in it.
  function summariesFromTheArticle() {
    if (typeof Search === "undefined" || typeof Search.htmlToText !== "function") return; // not the search page
    Search.htmlToText = (html, anchor) => {
      const page = new DOMParser().parseFromString(html, "text/html");
      const article = page.querySelector('[role="main"] article.bd-article') || page.querySelector('[role="main"]');
      if (!article) return "";
      article.querySelectorAll(".headerlink, script, style").forEach((e) => e.remove());
      let section = null;
      try {
        section = anchor ? article.querySelector(anchor) : null;
      } catch {
        section = null; // an id that is no valid selector: the whole article
      }
      return (section || article).textContent;
    };
  }

  searchFromFile(); // before the search runs (it starts once the page has loaded)
  document.addEventListener("DOMContentLoaded", () => {
    summariesFromTheArticle(); // searchtools.js, loaded after this file, has defined Search by now
    nameChevrons();
    labelSearchButton();
    closeDrawersOnTap();
  });
  window.addEventListener("resize", labelSearchButton); // the shortcut shows on a wide screen only
  const mathTypeset = () => (window.MathJax?.startup?.promise ?? Promise.resolve());
  for (const event of ["load", "resize"]) {
    window.addEventListener(event, fitFigures); // images have their natural size once loaded
    window.addEventListener(event, focusableTables);
    window.addEventListener(event, printedTables);
    window.addEventListener(event, () => mathTypeset().then(fitEquations)); // once MathJax has drawn them
  }
})();
