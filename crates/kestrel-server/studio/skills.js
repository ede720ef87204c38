// The Agent tab's skills: each skill's name and description, and on demand its instructions
// and files, from `GET /api/agents/{id}/skills/{name}`.

import { api } from "./api.js";
import { h } from "./render.js";

/** The list of files of one folder of a skill, or nothing when it has none. */
function files(title, list) {
  if (!list || !list.length) return null;
  return [h("h5", {}, title), h("ul", { class: "skill-files" }, list.map((path) => h("li", {}, h("code", {}, path))))];
}

/** One skill, whole, as the route gives it. */
function skillDetail(skill) {
  return h(
    "div",
    { class: "skill-detail", "data-testid": `skill-detail-${skill.name}` },
    skill.license ? h("p", { class: "muted" }, `License: ${skill.license}`) : null,
    h("div", { class: "instructions" }, skill.instructions || h("span", { class: "muted" }, "No instructions.")),
    files("References", skill.references),
    files("Scripts", skill.scripts),
    files("Assets", skill.assets),
  );
}

/** The "Skills" section of the Agent tab for agent `a`. */
export function skillsSection(a) {
  const skills = a.skills || [];
  const list = skills.length
    ? h(
        "ul",
        { class: "tool-list", "data-testid": "skill-list" },
        skills.map((skill) => {
          const slot = h("div", {});
          const show = h("button", { type: "button", class: "small ghost", "data-testid": `skill-show-${skill.name}` }, "Show");
          show.addEventListener("click", async () => {
            if (slot.childElementCount) {
              slot.replaceChildren();
              show.textContent = "Show";
              return;
            }
            show.disabled = true;
            try {
              const detail = await api(`/api/agents/${encodeURIComponent(a.id)}/skills/${encodeURIComponent(skill.name)}`);
              slot.replaceChildren(skillDetail(detail));
              show.textContent = "Hide";
            } catch (e) {
              slot.replaceChildren(h("p", { class: "error-text" }, e.message || String(e)));
            } finally {
              show.disabled = false;
            }
          });
          return h("li", { "data-testid": "skill-item" }, h("strong", {}, skill.name), " ", show, h("div", { class: "muted" }, skill.description), slot);
        }),
      )
    : h("p", { class: "muted" }, "No skills.");
  return h("div", { "data-testid": "agent-skills" }, h("h4", {}, "Skills"), list);
}
