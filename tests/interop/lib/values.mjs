// The official FerricStore SDK's answers as plain values: its default codec
// hands values back as Buffers, which the tests compare as text.
export const text = (v) => (Buffer.isBuffer(v) ? v.toString() : v);

export const norm = (v) => {
  if (Buffer.isBuffer(v)) return v.toString();
  if (Array.isArray(v)) return v.map(norm);
  if (v && typeof v === "object" && !(v instanceof Error)) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, norm(x)]));
  }
  return v;
};
