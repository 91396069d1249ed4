/** Markup that is already safe to send: produced by `html`, never from a row's text. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text
  }
}

const ENTITIES: Readonly<Record<string, string>> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" }

/** `value` as HTML text or a quoted attribute value: every character that could end either is an entity. */
export const escapeHtml = (value: string): string => value.replace(/[&<>"']/g, (c) => ENTITIES[c]!)

/** One interpolated value: markup as it is, a list joined, nothing for null, undefined or false, else escaped text. */
const part = (value: unknown): string =>
  value instanceof Html ? value.text
  : Array.isArray(value) ? value.map(part).join("")
  : value === null || value === undefined || value === false ? ""
  : escapeHtml(String(value))

/**
 * A template of markup in which every interpolated value is escaped unless it is itself `Html`: a stored id, error or payload
 * can only ever be text on the page.
 */
export const html = (strings: TemplateStringsArray, ...values: ReadonlyArray<unknown>): Html => {
  let out = strings[0]!
  for (let i = 0; i < values.length; i++) out += part(values[i]) + strings[i + 1]!
  return new Html(out)
}

/** Markup from a constant the package wrote (never a row's text). */
export const trusted = (text: string): Html => new Html(text)
