/**
 * A tiny element builder for the dashboard's renderers: `h('td', { class: 'num' }, '12')`.
 * Attributes are strings (or numbers); `undefined` and `false` skip an attribute or child.
 * Text children become text nodes, so nothing a peer or the head sends is parsed as HTML.
 */
export type Child = Node | string | number | undefined | false | null;
export type Attrs = Record<string, string | number | boolean | undefined>;

const SVG_NS = 'http://www.w3.org/2000/svg';

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  return fill(document.createElement(tag), attrs, children);
}

export function s<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): SVGElementTagNameMap[K] {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

function fill<E extends Element>(element: E, attrs: Attrs, children: Child[]): E {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    element.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child === undefined || child === false || child === null) continue;
    element.append(typeof child === 'number' ? String(child) : child);
  }
  return element;
}
