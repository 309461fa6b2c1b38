// The agentbus dashboard: sessions, their live activity and controls,
// chains, templates and skills, all through the public API.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, setToken, token } from "./api";
import { SessionList } from "./sessions";
import { SessionPage } from "./session";
import { ChainPage, Chains } from "./chains";
import { WebhookPage, Webhooks } from "./webhooks";
import { Catalog } from "./catalog";

function useRoute(): string {
  const [hash, setHash] = useState(location.hash.slice(1) || "/sessions");
  useEffect(() => {
    const on = () => setHash(location.hash.slice(1) || "/sessions");
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return hash;
}

function SignIn({ onDone }: { onDone: () => void }) {
  const [value, setValue] = useState("");
  const [error, setError] = useState("");
  const submit = async (e: Event) => {
    e.preventDefault();
    setToken(value);
    const { error } = await api.GET("/api/agents/pool");
    if (error) {
      setToken("");
      setError("That token is not accepted: " + (error.detail ?? error.title ?? ""));
      return;
    }
    onDone();
  };
  return (
    <form class="card signin" onSubmit={submit}>
      <h2>Sign in</h2>
      <p>Paste a bearer token: the one <code>agentbus up</code> prints, or one your identity provider issued.</p>
      <textarea id="token" rows={4} value={value} onInput={(e) => setValue(e.currentTarget.value)} />
      <button id="signin" type="submit" disabled={!value.trim()}>
        Sign in
      </button>
      {error && <p class="error">{error}</p>}
    </form>
  );
}

// SandboxWarning says so when this deployment runs agents outside their
// sandboxes (--unsandboxed), as /readyz reports it.
function SandboxWarning() {
  const [off, setOff] = useState(false);
  useEffect(() => {
    fetch("/readyz")
      .then((r) => r.json())
      .then((body) => setOff(body?.sandbox === "off"))
      .catch(() => {});
  }, []);
  if (!off) return null;
  return (
    <p class="error" role="alert" id="unsandboxed">
      Agents run unsandboxed on this deployment: every agent can read the server's files and reach its servers. Run them only for code you trust.
    </p>
  );
}

function App() {
  const route = useRoute();
  const [signedIn, setSignedIn] = useState(token() !== "");
  if (!signedIn) return <SignIn onDone={() => setSignedIn(true)} />;
  const [path, query] = route.split("?");
  const parts = path.split("/").filter(Boolean);
  let page;
  if (parts[0] === "sessions" && parts[1]) page = <SessionPage key={parts[1]} id={parts[1]} />;
  else if (parts[0] === "chains" && parts[1]) page = <ChainPage key={parts[1]} id={parts[1]} />;
  else if (parts[0] === "chains") page = <Chains />;
  else if (parts[0] === "webhooks" && parts[1]) page = <WebhookPage key={parts[1]} id={parts[1]} />;
  else if (parts[0] === "webhooks") page = <Webhooks />;
  else if (parts[0] === "templates" || parts[0] === "skills") page = <Catalog key={parts[0]} kind={parts[0]} id={parts[1]} />;
  else page = <SessionList template={new URLSearchParams(query ?? "").get("template") ?? ""} />;
  return (
    <>
      <nav>
        <strong>agentbus</strong>
        <a href="#/sessions">Sessions</a>
        <a href="#/chains">Chains</a>
        <a href="#/templates">Templates</a>
        <a href="#/skills">Skills</a>
        <a href="#/webhooks">Webhooks</a>
        <a href="/docs">API</a>
        <button
          class="link"
          onClick={() => {
            setToken("");
            setSignedIn(false);
          }}
        >
          Sign out
        </button>
      </nav>
      <SandboxWarning />
      <main>{page}</main>
    </>
  );
}

render(<App />, document.getElementById("app")!);
