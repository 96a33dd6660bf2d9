import { answerParent } from "../../../lib/threads.ts";
import { checkSamlResponse, SamlRefusal } from "./saml-check.ts";

// The SAML thread (see `saml.ts`): checks one response at a time for the API's thread.
answerParent(checkSamlResponse, (error) => (error instanceof SamlRefusal ? error.message : null));
