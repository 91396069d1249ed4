// C0 controls, DEL, C1 controls, the bidi embeddings, overrides and isolates (U+202A–202E, U+2066–2069),
// the bidi marks (U+061C, U+200E, U+200F) and the line and paragraph separators (U+2028, U+2029).
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g
const CONTROL_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g

const SHORT: Readonly<Record<string, string>> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" }

const hex = (char: string, width: 2 | 4) => char.charCodeAt(0).toString(16).padStart(width, "0")

/**
 * `text` as one cell or one line may show it: every control character (C0,
 * DEL, C1) and every bidi override, isolate or mark written out visibly as
 * an escape (`\n`, `\r`, `\t`, `\x1b`, `\u202e`), so a stored value can
 * neither move the cursor, clear the screen, start a forged line nor
 * reorder what follows it.
 */
export const printable = (text: string): string =>
  text.replace(CONTROL, (char) => SHORT[char] ?? (char.charCodeAt(0) <= 0xff ? `\\x${hex(char, 2)}` : `\\u${hex(char, 4)}`))

/**
 * What the CLI writes to a terminal: `text` with every character `printable`
 * escapes, but its line breaks, written as a `\u` escape. A JSON document
 * stays the same JSON (those characters can only stand inside its strings,
 * where the escape means the same character).
 */
export const terminalSafe = (text: string): string => text.replace(CONTROL_BUT_NEWLINE, (char) => `\\u${hex(char, 4)}`)

/**
 * Renders rows as a plain aligned text table under `headers`. Cells are
 * strings, shown `printable`; a column is as wide as its widest cell.
 */
export const renderTable = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const shown = rows.map((row) => row.map(printable))
  const widths = headers.map((header, i) => Math.max(header.length, ...shown.map((row) => (row[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((cell, i) => i === cells.length - 1 ? cell : cell.padEnd(widths[i]!)).join("  ").trimEnd()
  return [line(headers), ...shown.map(line)].join("\n")
}

/** Renders `label: value` pairs, labels aligned, values shown `printable`. */
export const renderFields = (fields: ReadonlyArray<readonly [string, string]>): string => {
  const width = Math.max(...fields.map(([label]) => label.length))
  return fields.map(([label, value]) => `${`${label}:`.padEnd(width + 1)} ${printable(value)}`).join("\n")
}
