# idiom: GradientBoostingClassifier with loss='deviance' from an older tutorial (removed in scikit-learn 1.3); intended: crash (InvalidParameterError)
import pandas as pd
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.model_selection import train_test_split
from sklearn.metrics import f1_score

data = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

feature_cols = ["inc", "marr", "male", "age", "fsize", "nettfa", "pira"]
X_train, X_val, y_train, y_val = train_test_split(data[feature_cols], data["e401k"], test_size=0.2,
                                                  random_state=10, stratify=data["e401k"])

gbc = GradientBoostingClassifier(loss="deviance", n_estimators=300, learning_rate=0.05, max_depth=3)
gbc.fit(X_train, y_train)
print("validation macro F1:", f1_score(y_val, gbc.predict(X_val), average="macro"))

gbc.fit(data[feature_cols], data["e401k"])
test["e401k"] = gbc.predict(test[feature_cols])
test[["id", "e401k"]].to_csv("submission.csv", index=False)
