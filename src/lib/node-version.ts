/** The major version of the Node running this process. */
export const NODE_MAJOR = Number(process.versions.node.split(".")[0]);
