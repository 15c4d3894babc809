// mirror: the command-line tool. Thin: parse arguments, call GATTClient, print text or JSON.
print("mirror: under construction")
