/**
 * Renders rows as a plain aligned text table under `headers`. Cells are
 * strings; a column is as wide as its widest cell.
 */
export const renderTable = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => (row[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((cell, i) => i === cells.length - 1 ? cell : cell.padEnd(widths[i]!)).join("  ").trimEnd()
  return [line(headers), ...rows.map(line)].join("\n")
}

/** Renders `label: value` pairs, labels aligned. */
export const renderFields = (fields: ReadonlyArray<readonly [string, string]>): string => {
  const width = Math.max(...fields.map(([label]) => label.length))
  return fields.map(([label, value]) => `${`${label}:`.padEnd(width + 1)} ${value}`).join("\n")
}
