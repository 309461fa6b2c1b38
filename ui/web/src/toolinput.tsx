// A tool call's input as people read it: a command as the command, an
// edit as a diff, a write as its lines, a question with its options;
// anything else as indented JSON. Never escaped JSON in one line.
type Input = Record<string, unknown>;

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

export function parseInput(raw: string): Input {
  try {
    const v = JSON.parse(raw);
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Input) : { value: v };
  } catch {
    return { value: raw };
  }
}

// inputHeadline is the one line that names what a tool call does.
export function inputHeadline(input: Input): string {
  const questions = input["questions"];
  if (Array.isArray(questions)) return questions.map((q) => str((q as Input)["question"])).join(" · ");
  return str(input["command"]) || str(input["file_path"]) || str(input["pattern"]) || str(input["url"]) || str(input["description"]);
}

export function ToolInput({ input }: { input: Input }) {
  const command = str(input["command"]);
  if (command) return <pre class="command">$ {command}</pre>;
  const path = str(input["file_path"]);
  if (path && ("old_string" in input || "new_string" in input)) {
    return (
      <div class="diff">
        <div class="path">{path}</div>
        <pre>
          {str(input["old_string"]).split("\n").map((l) => <div class="del">- {l}</div>)}
          {str(input["new_string"]).split("\n").map((l) => <div class="add">+ {l}</div>)}
        </pre>
      </div>
    );
  }
  if (path && "content" in input) {
    return (
      <div class="diff">
        <div class="path">{path}</div>
        <pre>{str(input["content"]).replace(/\n$/, "").split("\n").map((l) => <div class="add">+ {l}</div>)}</pre>
      </div>
    );
  }
  const questions = input["questions"];
  if (Array.isArray(questions)) {
    return (
      <ul class="questions">
        {questions.map((q) => {
          const options = ((q as Input)["options"] as Input[] | undefined) ?? [];
          return (
            <li>
              {str((q as Input)["question"])} {options.length > 0 && <span class="muted">[{options.map((o) => str(o["label"])).join(" | ")}]</span>}
            </li>
          );
        })}
      </ul>
    );
  }
  if (path && Object.keys(input).length === 1) return <div class="path">{path}</div>;
  return <pre>{JSON.stringify(input, null, 2)}</pre>;
}
