// A tiny DOM builder. Text always goes in as text nodes, never as HTML, so API data (prompts,
// tags, error messages) cannot inject markup.

/**
 * h('a', {href: '#/batches', class: 'button'}, 'Batches', child…) → an element.
 * Attributes: `onX` adds an event listener, `true` sets a boolean attribute, `null`/`false`
 * leave it out, anything else is set as a string. Children: nodes, strings, numbers, arrays;
 * null/false are skipped.
 */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      element.addEventListener(name.slice(2), value);
    } else if (name === 'class') {
      element.className = value;
    } else {
      element.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(element, children);
  return element;
}

/** Appends children (nodes, strings, numbers, nested arrays; null/false skipped). */
export function append(element, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

/** Replaces every child of `element`. */
export function replace(element, ...children) {
  element.replaceChildren();
  return append(element, children);
}
