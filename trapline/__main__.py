from trapline.cli import main

raise SystemExit(main())
