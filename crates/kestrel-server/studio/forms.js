// Forms built from a JSON schema: the resume data a suspended tool asks for.
//
// An object schema gets one field per property: a checkbox for a boolean, a number input for a
// number or an integer, a select for an enum (or a `oneOf` of constants), a text input for a
// string, and a JSON text area for anything else. `$ref`s into `$defs` / `definitions` are
// followed and `["string", "null"]` types (optional fields) are read as their non-null type.
// Any other schema (or none) gets one JSON text area.

import { h } from "./render.js";

/** Parses a schema given as a string (events) or an object (tool descriptions). */
export function parseSchema(schema) {
  if (!schema) return null;
  if (typeof schema === "object") return schema;
  try {
    return JSON.parse(schema);
  } catch {
    return null;
  }
}

function resolve(node, root, seen = 0) {
  if (!node || typeof node !== "object" || seen > 8) return node || {};
  if (typeof node.$ref === "string") {
    const match = node.$ref.match(/^#\/(\$defs|definitions)\/(.+)$/);
    const target = match && root[match[1]] && root[match[1]][decodeURIComponent(match[2])];
    if (target) return resolve({ ...target, ...without(node, "$ref") }, root, seen + 1);
  }
  // `anyOf: [X, {type: null}]` is how optional values are written.
  for (const key of ["anyOf", "oneOf"]) {
    if (Array.isArray(node[key])) {
      const options = node[key].filter((o) => !(o && o.type === "null"));
      if (options.length === 1) {
        return resolve({ ...without(node, key), ...options[0], description: node.description || options[0].description }, root, seen + 1);
      }
    }
  }
  return node;
}

function without(object, key) {
  const copy = { ...object };
  delete copy[key];
  return copy;
}

/** The field kind of a resolved property schema, and its choices for a select. */
function kindOf(node) {
  const values = constants(node);
  if (values) return { kind: "enum", values };
  let type = node.type;
  if (Array.isArray(type)) type = type.find((t) => t !== "null");
  if (type === "boolean") return { kind: "boolean" };
  if (type === "integer" || type === "number") return { kind: type };
  if (type === "string") return { kind: "string" };
  return { kind: "json" };
}

/** The allowed values of an enum-like schema, or null. */
function constants(node) {
  if (Array.isArray(node.enum)) return node.enum.filter((v) => v !== null).map((v) => ({ value: v, label: String(v) }));
  for (const key of ["oneOf", "anyOf"]) {
    const list = node[key];
    if (Array.isArray(list) && list.length && list.every((o) => o && ("const" in o || (Array.isArray(o.enum) && o.enum.length === 1)))) {
      return list.map((o) => {
        const value = "const" in o ? o.const : o.enum[0];
        return { value, label: o.description ? `${value} — ${o.description}` : String(value) };
      });
    }
  }
  return null;
}

/** Words from a property name: `guestCount` / `guest_count` → "Guest count". */
export function labelOf(name, node) {
  if (node && typeof node.title === "string") return node.title;
  const words = name.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/[_-]+/g, " ").trim().toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

let counter = 0;

/**
 * A form for `schema`. `onSubmit(data)` gets the resume data; it may return a promise, during
 * which the form is disabled. Returns the form element.
 */
export function schemaForm(schema, onSubmit, { submitLabel = "Resume", testId = "resume-form", jsonLabel = "Resume data (JSON)" } = {}) {
  const root = parseSchema(schema) || {};
  const top = resolve(root, root);
  const fields = [];
  const form = h("form", { class: "schema-form", "data-testid": testId, novalidate: true });
  const uid = `f${++counter}`;
  const properties = top && top.type === "object" && top.properties ? top.properties : null;

  if (properties) {
    const required = new Set(top.required || []);
    for (const [name, raw] of Object.entries(properties)) {
      const node = resolve(raw, root);
      const { kind, values } = kindOf(node);
      const id = `${uid}-${name}`;
      const isRequired = required.has(name) && kind !== "boolean";
      const label = h("label", { for: id }, labelOf(name, node), isRequired ? h("span", { class: "required", "aria-hidden": "true" }, " *") : null);
      let input;
      if (kind === "boolean") {
        input = h("input", { type: "checkbox", id, name, "data-field": name });
        if (node.default === true) input.checked = true;
      } else if (kind === "enum") {
        input = h("select", { id, name, "data-field": name },
          isRequired ? null : h("option", { value: "" }, "—"),
          ...values.map((v, i) => h("option", { value: String(i) }, v.label)));
        if (node.default !== undefined) {
          const i = values.findIndex((v) => v.value === node.default);
          if (i >= 0) input.value = String(i);
        }
      } else if (kind === "integer" || kind === "number") {
        input = h("input", { type: "number", id, name, "data-field": name, step: kind === "integer" ? "1" : "any" });
        if (typeof node.minimum === "number") input.min = String(node.minimum);
        if (typeof node.maximum === "number") input.max = String(node.maximum);
        if (typeof node.default === "number") input.value = String(node.default);
      } else if (kind === "string") {
        input = h("input", { type: "text", id, name, "data-field": name });
        if (typeof node.default === "string") input.value = node.default;
      } else {
        input = h("textarea", { id, name, "data-field": name, rows: "3", class: "mono", placeholder: "JSON" });
      }
      if (isRequired) input.setAttribute("aria-required", "true");
      const hint = node.description ? h("small", { class: "hint", id: `${id}-hint` }, node.description) : null;
      if (hint) input.setAttribute("aria-describedby", `${id}-hint`);
      const row = kind === "boolean"
        ? h("div", { class: "field field-check" }, input, label, hint)
        : h("div", { class: "field" }, label, input, hint);
      form.append(row);
      fields.push({ name, kind, values, input, required: isRequired });
    }
  } else {
    const id = `${uid}-json`;
    const input = h("textarea", { id, rows: "4", class: "mono", "data-field": "json", placeholder: "{ }" });
    form.append(h("div", { class: "field" }, h("label", { for: id }, jsonLabel), input));
    fields.push({ name: null, kind: "json", input, required: true });
  }

  const error = h("p", { class: "form-error", role: "alert", hidden: true });
  const submit = h("button", { type: "submit", class: "primary", "data-testid": "resume" }, submitLabel);
  form.append(error, h("div", { class: "actions" }, submit));

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    let data;
    try {
      data = collect(fields);
    } catch (problem) {
      error.textContent = problem.message;
      error.hidden = false;
      return;
    }
    error.hidden = true;
    for (const el of form.elements) el.disabled = true;
    try {
      await onSubmit(data);
    } catch (problem) {
      error.textContent = problem.message || String(problem);
      error.hidden = false;
      for (const el of form.elements) el.disabled = false;
    }
  });
  return form;
}

function collect(fields) {
  if (fields.length === 1 && fields[0].name === null) {
    return parseJson(fields[0].input.value, "The data");
  }
  const data = {};
  for (const field of fields) {
    const { name, kind, input } = field;
    const label = labelOf(name);
    if (kind === "boolean") {
      data[name] = input.checked;
      continue;
    }
    const raw = input.value.trim();
    if (raw === "") {
      if (field.required) throw new Error(`${label} is required.`);
      continue;
    }
    if (kind === "enum") data[name] = field.values[Number(raw)].value;
    else if (kind === "integer" || kind === "number") {
      const n = Number(raw);
      if (!Number.isFinite(n) || (kind === "integer" && !Number.isInteger(n))) {
        throw new Error(`${label} must be ${kind === "integer" ? "a whole number" : "a number"}.`);
      }
      data[name] = n;
    } else if (kind === "string") data[name] = input.value;
    else data[name] = parseJson(raw, label);
  }
  return data;
}

function parseJson(text, label) {
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`${label} is not valid JSON.`);
  }
}
