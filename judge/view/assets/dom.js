// What the viewer's pages (judge view, judge view --monitor) share: the one DOM builder (an
// element with attributes and children, every text set through textContent or an attribute,
// never innerHTML, so that no user text is read as markup), the isolation of user text, the
// number format and the colours.
(function () {
  "use strict";

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      var value = attrs[key];
      if (value === null || value === undefined || value === false) return;
      if (key === "text") node.textContent = String(value);
      else if (key === "className") node.className = value;
      else node.setAttribute(key, value === true ? "" : String(value));
    });
    (children || []).forEach(function (child) {
      if (child === null || child === undefined) return;
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  var MISSING = "\u2013";

  // A number with `digits` decimals (3 by default), a plus sign on positive values when
  // `sign`; the dash for a missing value.
  function num(value, digits, sign) {
    if (value === null || value === undefined || Number.isNaN(value)) return MISSING;
    var text = Number(value).toFixed(digits === undefined ? 3 : digits);
    return sign && value > 0 ? "+" + text : text;
  }

  // User text in a plain string (a canvas label, a title attribute): first strong
  // isolate ... pop directional isolate, which also ends any override opened inside.
  function isolated(text) {
    return "\u2068" + text + "\u2069";
  }

  // User text in the page: its own <bdi>.
  function bdi(text) {
    return el("bdi", { text: text });
  }

  var colours = {
    BLUE: "rgb(63, 111, 181)",
    BAND: "rgba(63, 111, 181, 0.18)",
    GREY: "rgb(110, 110, 110)",
    GREY_BAND: "rgba(110, 110, 110, 0.14)",
    RED: "rgb(176, 0, 32)",
  };

  window.JudgeDom = {
    el: el, num: num, isolated: isolated, bdi: bdi, MISSING: MISSING, colours: colours,
  };
})();
