/* Router: every page is a hash URL (#/run/KEY/samples?language=ar&sort=disagreement ...), so every
   view, sample and filter can be bookmarked and shared, from a server or from file://. */
"use strict";

async function route() {
  const main = document.getElementById("app");
  const { parts, params } = DV.parseHash();
  DV.tip.hide();
  DV.setStatus("");
  const key = parts[0] === "run" ? parts[1] : null;
  const nav = [DV.h("a", { href: DV.link([], { list: 1 }), class: parts.length === 0 ? "active" : null }, "runs")];
  if (key) {
    nav.push(DV.h("a", { href: DV.link(["run", key]), class: parts.length === 2 ? "active" : null }, "overview"));
    nav.push(DV.h("a", { href: DV.link(["run", key, "samples"]), class: parts[2] === "samples" ? "active" : null }, "samples"));
  }
  nav.push(DV.h("a", { href: DV.link(["compare"], key ? { runs: [key] } : {}), class: parts[0] === "compare" ? "active" : null }, "compare"));
  document.getElementById("nav").replaceChildren(...nav);
  try {
    if (parts.length === 0) {
      const runs = await DV.source.runs();
      if (runs.length === 1 && !params.get("list")) { location.replace(DV.link(["run", runs[0].key])); return; }
      await DV.pages.runs(main);
    } else if (key && parts.length === 2) await DV.pages.overview(main, key, params);
    else if (key && parts[2] === "samples") await DV.pages.samples(main, key, params);
    else if (key && parts[2] === "sample") await DV.pages.sample(main, key, params);
    else if (parts[0] === "compare") await DV.pages.compare(main, params);
    else main.replaceChildren(DV.h("h1", {}, "Not found"), DV.h("p", {}, DV.h("a", { href: "#/" }, "all runs")));
    document.title = "dialeval viewer · " + (parts.join(" / ") || "runs");
  } catch (e) {
    main.replaceChildren(DV.errorBox(e));
  }
  document.body.dataset.ready = location.hash;  // for tests: the page for this URL has rendered
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", route);
